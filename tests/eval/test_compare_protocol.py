"""`coplay eval --compare` on the files a demo-like run folder holds: the evaluation `coplay eval RUN`
writes and the ruler's `bots-<bot>.json` beside it record the same seeds, horizon and protocol, so comparing
them warns of nothing; a horizon that truly differs is the one warning; a file from before evaluations
recorded their protocol is noted as not checked, never reported as a difference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coplay.cli import main
from coplay.config import load_config
from coplay.files import write_json_atomic
from coplay.runs import RunDir

CONFIG = Path(__file__).resolve().parents[2] / "launch" / "configs" / "demo-2048-smollm2.yaml"


def _run(args: list[str], capsys) -> str:
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.fixture
def demo_run(tmp_path) -> RunDir:
    """A run folder with the 2048 SmolLM2 demo's resolved config (8 evaluation seeds, 8 moves)."""
    cfg = load_config(CONFIG, [])
    assert (cfg.eval.episodes, cfg.eval.max_steps or cfg.rollout.max_steps) == (8, 8)
    return RunDir.create(tmp_path, "demo", cfg.to_yaml())


def test_the_runs_own_files_compare_without_warnings(demo_run, capsys):
    _run(["eval", str(demo_run.root), "--policy", "expert"], capsys)
    (evaluation,) = [p for p in demo_run.eval.glob("*.json") if not p.name.startswith("bots-")]
    assert evaluation.name == "expert_2048_seeds1000000-n8.json"  # single-player: no opponent in the name
    for path in (evaluation, *demo_run.eval.glob("bots-*.json")):
        meta = json.loads(path.read_text())["meta"]
        assert meta["seeds"] == list(range(1_000_000, 1_000_008)) and meta["max_steps"] == 8, path.name
        assert meta["protocol"]["env_kwargs"] == {"2048": {}} and meta["episodes_single"] == 8, path.name
        assert ("Protocol: games 2048; seeds 1000000-1000007 (8 episodes per game); horizon 8 steps."
                in path.with_suffix(".md").read_text()), path.name
    text = _run(["eval", "--compare", str(demo_run.eval / "bots-random.json"), str(evaluation)], capsys)
    assert "warning" not in text and "note" not in text


def test_a_horizon_that_truly_differs_is_the_one_warning(demo_run, capsys):
    _run(["eval", str(demo_run.root), "--policy", "expert", "--max-steps", "5"], capsys)
    (short,) = [p for p in demo_run.eval.glob("expert_*.json")]
    bots = sorted(demo_run.eval.glob("bots-random*.json"))
    assert [json.loads(p.read_text())["meta"]["max_steps"] for p in bots] == [5]
    # the bots on the run's own 8 moves, as the loop writes them
    _run(["eval", str(demo_run.root), "--policy", "random", "--out", str(demo_run.root / "other")], capsys)
    text = _run(["eval", "--compare", str(demo_run.root / "other" / "bots-random.json"), str(short)], capsys)
    warnings = [line for line in text.splitlines() if line.startswith("warning")]
    assert warnings == ["warning: the two sides differ in horizon (max steps): 8 vs 5"]


def test_a_file_that_records_no_protocol_is_noted_not_warned(demo_run, capsys):
    _run(["eval", str(demo_run.root), "--policy", "expert"], capsys)
    (evaluation,) = demo_run.eval.glob("expert_*.json")
    old: Path = demo_run.eval / "bots-random.json"
    body = json.loads(old.read_text())
    body["meta"] = {"player": "random", "demo": True}  # what the demo wrote before the ruler
    write_json_atomic(old, body)
    text = _run(["eval", "--compare", str(old), str(evaluation)], capsys)
    assert "warning" not in text
    assert ("note: not recorded, so not checked: A its episodes per game; A its first seed; A its horizon"
            in text)
