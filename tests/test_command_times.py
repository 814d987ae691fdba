"""`benchmarks/command_times.py`: the README's timing table is made by running the README's own commands,
so a command the README shows and the benchmark does not time (or the other way round) is a test failure,
and a command whose run folder was never made is reported as skipped, not run with a placeholder."""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.command_times import COMMANDS, eval_pair, fill

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_commands() -> set[str]:
    """The `coplay ...` lines of the README's everyday block, without their comments and options in []."""
    block = README.read_text().split("## Everyday commands", 1)[1].split("```", 2)[1]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return {re.sub(r"\s*\[[^\]]*\]", "", line) for line in lines if line.startswith("coplay ")}


def test_every_everyday_command_of_the_readme_is_timed():
    timed = {re.sub(r"\s*\[[^\]]*\]", "", template) for _, template in COMMANDS}
    placeholders = {"RUN_DIR": "RUN_DIR", "DEMO_RUN": "RUN_DIR", "EVAL_A": "A.json", "EVAL_B": "B.json"}
    as_written = set()
    for template in timed:
        for key, value in placeholders.items():
            template = template.replace(key, value)
        as_written.add(template)
    assert _readme_commands() == as_written


def test_a_command_whose_run_folder_was_not_made_is_not_run(tmp_path):
    assert fill("coplay eval RUN_DIR", {}) is None
    assert fill("coplay eval RUN_DIR", {"RUN_DIR": tmp_path}) == f"coplay eval {tmp_path}"
    assert fill("coplay eval --compare EVAL_A EVAL_B", {"EVAL_A": tmp_path}) is None


def test_compare_takes_the_random_bot_and_the_newest_own_evaluation(tmp_path):
    assert eval_pair(tmp_path) is None
    (tmp_path / "eval").mkdir()
    for name in ("bots-random.json", "probe-it00000.json", "old.json", "new.json"):
        (tmp_path / "eval" / name).write_text("{}")
    import os
    os.utime(tmp_path / "eval" / "old.json", (1, 1))
    assert eval_pair(tmp_path) == (tmp_path / "eval" / "bots-random.json", tmp_path / "eval" / "new.json")
