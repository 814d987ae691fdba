"""The constrained-orders benchmark (benchmarks/constrained_orders.py) runs end to end on the tiny model: both
modes answer every power, and under the constraint every unit gets a legal order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_quick_run_prints_both_modes_and_the_constraint_leaves_no_unit_without_an_order():
    done = subprocess.run([sys.executable, "-m", "benchmarks.constrained_orders", "--quick"], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])  # stdout carries only the JSON
    assert result["command"].startswith("python -m benchmarks.constrained_orders --model tiny --backend vllm")
    for mode in ("free", "constrained"):
        assert result[mode]["answers"] == 7 and result[mode]["tokens_per_s_median"] > 0
    assert result["constrained"]["invalid_order_rate_median"] == 0.0
    assert result["tokens_per_s_ratio"] > 0
