"""`python -m coplay.learn`: the standalone learner (`coplay.learn.standalone`; arguments in `coplay.cli`)."""

from __future__ import annotations

import sys

from coplay.cli import learn_main as main

if __name__ == "__main__":
    sys.exit(main())
