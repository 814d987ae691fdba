"""One finished tiny run (staleness 1, 2 iterations) and what a user does with it next (issue 20, items 3
and 4): `coplay train` left report.html; resuming it with nothing to do says so and appends nothing; each
kind of corrupt file is named in one line before anything starts; `coplay report` on a corrupt bank exits
non-zero; a torn last metrics line is reported; extending it by one iteration adds exactly that iteration.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from coplay.cli import main
from coplay.config import load_config
from coplay.runs import RunDir
from tests.helpers import DEMO_CONFIG, assert_every_episode_once, tiny_loop_overrides


@pytest.fixture(scope="module")
def finished(ray_cluster, tmp_path_factory, tiny_model_config) -> Path:
    runs = tmp_path_factory.mktemp("finished")
    overrides = [*tiny_loop_overrides(str(runs), tiny_model_config.tiny.cache_dir), "sft.epochs=1",
                 "sft.episodes_per_game=8", "loop.staleness=1", "loop.checkpoint_every=1"]
    assert main(["train", "--config", str(DEMO_CONFIG), *overrides]) == 0
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    return folder


def _copy(finished: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished, tmp_path / finished.name))


def _first_bank(run: Path) -> str:
    return str(min((p for p in run.glob("banks/2048/v*.json") if "manifest" not in p.name),
                   key=lambda p: int(p.stem[1:])).relative_to(run))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def test_train_leaves_its_report_in_the_run_folder(finished):
    report = finished / "report.html"
    assert report.is_file() and "Learning curves" in report.read_text()


def test_resuming_a_finished_run_says_there_is_nothing_to_do_and_appends_nothing(finished, tmp_path, capsys):
    run = _copy(finished, tmp_path)
    before = (run / "metrics.jsonl").read_bytes()
    assert main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert "is finished" in out and "nothing to do" in out and "loop.iterations=3" in out
    assert (run / "metrics.jsonl").read_bytes() == before


@pytest.mark.parametrize("target", ["bank", "checkpoints/step-2/state.json",
                                    "checkpoints/step-2/adapters.safetensors",
                                    "adapters/act/v0/adapter_model.safetensors"])
def test_a_truncated_file_is_named_in_one_line_before_anything_starts(finished, tmp_path, capsys, target):
    run = _copy(finished, tmp_path)
    target = _first_bank(run) if target == "bank" else target
    _truncate(run / target)
    started = time.monotonic()
    code = main(["train", "--resume", str(run), "loop.iterations=3"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and str(run / target) in err, err
    assert elapsed < 10, f"{elapsed:.1f} s: the folder must be checked before the actors start"


def test_report_on_a_corrupt_bank_exits_non_zero_and_says_so_in_the_page(finished, tmp_path, capsys):
    run = _copy(finished, tmp_path)
    bank = _first_bank(run)
    _truncate(run / bank)
    assert main(["report", str(run)]) == 1
    err = capsys.readouterr().err
    assert str(run / bank) in err
    assert str(run / bank) in (run / "report.html").read_text()


def test_a_torn_last_metrics_line_is_reported_and_cut_off_before_a_resume_appends(finished, tmp_path,
                                                                                 capsys):
    from coplay.driver.preflight import resume_point

    run = RunDir.open(_copy(finished, tmp_path))
    with open(run.metrics_path, "a") as f:
        f.write('{"iteration": 9, "scor')
    assert main(["report", str(run.root)]) == 1
    assert "metrics.jsonl: the last line is torn" in capsys.readouterr().err
    resume_point(run, load_config(run.config_path, ["loop.iterations=3"]))
    assert "torn" in capsys.readouterr().err
    assert run.torn_metrics_tail() == "" and (run.root / "metrics.jsonl.torn").read_text().startswith('{"it')


def test_extending_a_finished_run_adds_exactly_the_new_iteration(finished):
    before = RunDir.open(finished).read_metrics()
    assert main(["train", "--resume", str(finished), "loop.iterations=3"]) == 0
    run = RunDir.open(finished)
    added = run.read_metrics()[len(before):]
    assert "resumed_from" in added[0]
    assert sorted({r["iteration"] for r in added if "scores" in r}) == [3]
    assert [r["final_train"]["trained_iteration"] for r in added if "final_train" in r] == [3]
    assert_every_episode_once(load_config(run.config_path, ["loop.iterations=3"]), run)


def test_an_error_inside_a_ray_actor_reaches_the_user_as_one_line(ray_cluster, tmp_path):
    """The remote traceback goes to the run folder's error.log; the user sees the actor's own message."""
    import ray
    from ray.exceptions import RayTaskError

    from coplay.driver.preflight import run_stopped

    @ray.remote
    class Failing:
        def update(self) -> None:
            raise ValueError("bank 2048 v3: not JSON")

    actor = Failing.remote()
    with pytest.raises(RayTaskError) as caught:
        ray.get(actor.update.remote())
    run = RunDir.create(tmp_path, "failing", "{}\n")
    stopped = run_stopped(run, caught.value)
    assert str(stopped).startswith("ValueError: bank 2048 v3: not JSON (traceback in ")
    assert "\n" not in str(stopped) and stopped.exit_code == 1
    assert "coplay train --resume" in str(stopped)
    assert "Traceback" in (run.root / "error.log").read_text()
    ray.kill(actor)


def test_versions_published_after_the_checkpoint_are_removed_before_a_resume(finished, tmp_path, capsys):
    """A driver killed after checkpoint k can leave versions of iteration k+1 behind (actors outlive it for
    a moment), one of them half-written: the resume removes them before checking the folder."""
    import json

    from coplay.driver.preflight import resume_point

    run = RunDir.open(_copy(finished, tmp_path))
    for ckpt in run.root.glob("checkpoints/step-*"):
        if ckpt.name != "step-1":  # the run as a driver killed after checkpoint 1 left it
            shutil.rmtree(ckpt)
    state = json.loads((run.checkpoint_dir(1) / "state.json").read_text())["extra"]
    latest_act = max(int(v) for v in state["ledger"][max(state["ledger"], key=int)].values())
    half = run.root / "banks" / "2048" / "v99.json"
    half.write_text('{"skills": ')  # its manifest was never written
    point = resume_point(run, load_config(run.config_path, ["loop.iterations=3"]))
    assert point.checkpoint == run.checkpoint_dir(1)
    err = capsys.readouterr().err
    assert "published after step-1" in err and "banks/2048/v99.json" in err
    assert not half.exists()
    assert all(int(p.name[1:]) <= latest_act for p in run.root.glob("adapters/act/v*"))
