"""The whole benchmark suite: envs, engines, skill bank, learner, e2e (see benchmarks/README.md).

Run: ``python -m benchmarks.run_all [--quick] [--only envs,learner]`` (the same as ``coplay bench``).
Each member runs as its own process; the results land in ``benchmarks/results/<host>-<date>.json``.
"""

from __future__ import annotations

import sys

from coplay.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
