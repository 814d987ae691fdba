"""`benchmarks.reevaluate` assembles checkpoints' evaluations and probes into one paired table, and reads a
measurement already on disk only when it is of the same policy and run (an interrupted comparison resumes;
another protocol's file is never taken for this one's)."""

from __future__ import annotations

import json
import subprocess

import pytest

from benchmarks import reevaluate
from coplay.cli import main


def _write(out, stem: str, bot: str, run_dir, player: str, probe: bool, cache) -> None:
    args = ["eval", "probe.positions=8", f"probe.cache_dir={cache}", "--policy", bot, "--games", "2048",
            "--out", str(out), "--name", stem]
    args += ["--probe"] if probe else ["--episodes", "4", "--max-steps", "4"]
    assert main(args) == 0
    path = out / f"{stem}.json"
    data = json.loads(path.read_text())
    # as a base model's file reads (no run) or a checkpoint's
    data["meta"].update(player=player, run=None if player == "base" else str(run_dir))
    path.write_text(json.dumps(data))


@pytest.fixture
def measured(tmp_path, capsys):
    """Files for `base` (played by the random bot) and `a-step1` (by the expert bot) in `cmp/`."""
    run_dir, out = tmp_path / "run", tmp_path / "cmp"
    run_dir.mkdir()
    for label, bot, player in (("base", "random", "base"), ("a-step1", "expert", "run-step1")):
        for probe in (False, True):
            stem = f"{'probe-' if probe else ''}{label}"
            _write(out, stem, bot, run_dir, player, probe, tmp_path / "cache")
    capsys.readouterr()
    return run_dir, tmp_path


def test_files_on_disk_make_the_paired_table_without_measuring(measured, monkeypatch, capsys):
    run_dir, tmp_path = measured

    def no_measuring(*args, **kwargs):
        raise AssertionError("a matching file must be read, not measured again")

    monkeypatch.setattr(subprocess, "run", no_measuring)
    assert reevaluate.main(["--run", f"a={run_dir}", "--steps", "1", "--name", "cmp", "--out",
                            str(tmp_path)]) == 0
    result = json.loads((tmp_path / "cmp.json").read_text())
    rows = result["games"]["2048"]["policies"]
    base_seeds = json.loads((tmp_path / "cmp" / "base.json").read_text())["results"]["2048"]["per_seed"]
    step_seeds = json.loads((tmp_path / "cmp" / "a-step1.json").read_text())["results"]["2048"]["per_seed"]
    expected = sum(step_seeds[s] - base_seeds[s] for s in base_seeds) / len(base_seeds)
    assert rows["a-step1"]["score_minus_base"]["difference"] == pytest.approx(expected)
    assert rows["a-step1"]["score_minus_base"]["n"] == 4
    # the expert's choices have less regret than the random bot's on the same 8 positions
    assert rows["a-step1"]["probe_minus_base"]["difference"] < 0
    assert "score_minus_base" not in rows["base"] and result["reused"] == 4
    text = (tmp_path / "cmp.md").read_text()
    assert "| a-step1 |" in text and "| expert bot |" in text and "Protocol check:" in text


@pytest.mark.parametrize("change", [{"player": "run-step2"}, {"run": "/elsewhere/other-run"}])
def test_a_file_of_another_policy_is_refused_not_reused(measured, monkeypatch, change):
    run_dir, tmp_path = measured
    path = tmp_path / "cmp" / "a-step1.json"
    data = json.loads(path.read_text())
    data["meta"].update(change)
    path.write_text(json.dumps(data))
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("must not measure over a file"))
    with pytest.raises(SystemExit, match="another protocol or policy"):
        reevaluate.main(["--run", f"a={run_dir}", "--steps", "1", "--name", "cmp", "--out", str(tmp_path)])


def test_no_probe_tabulates_the_episode_evaluations_alone(measured, monkeypatch):
    run_dir, tmp_path = measured
    for stem in ("probe-base", "probe-a-step1"):
        (tmp_path / "cmp" / f"{stem}.json").unlink()
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a matching file must be read"))
    assert reevaluate.main(["--run", f"a={run_dir}", "--steps", "1", "--name", "cmp", "--out", str(tmp_path),
                            "--no-probe"]) == 0
    row = json.loads((tmp_path / "cmp.json").read_text())["games"]["2048"]["policies"]["a-step1"]
    assert "probe" not in row and row["score_minus_base"]["n"] == 4 and "games_equal_to_base" in row
