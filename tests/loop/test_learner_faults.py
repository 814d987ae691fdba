"""A learner rank killed while the loop runs (issue 18 part 2), on a real local Ray cluster: the run stops at
once with one line naming the rank and the resume command, and `--resume` then finishes the run from the
newest checkpoint (versions the stopped run published after it are made again)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from coplay.config import load_config
from coplay.runs import RunDir
from tests.helpers import DEMO_CONFIG, tiny_loop_overrides


def _kill_rank_after_first_checkpoint(runs: Path, killed: list[str]) -> None:
    import ray

    deadline = time.time() + 900
    while time.time() < deadline:
        for folder in runs.glob("*/"):
            if (folder / "checkpoints" / "step-1").is_dir():
                name = f"{folder.name}.learner-0"
                ray.kill(ray.get_actor(name), no_restart=True)
                killed.append(name)
                return
        time.sleep(0.1)


@pytest.mark.slow
def test_a_killed_learner_rank_stops_the_run_with_the_resume_command_and_resume_finishes(
        ray_cluster, tmp_path, tiny_model_config):
    from coplay.actors.learner_group import LearnerDiedError
    from coplay.loop import train

    runs = tmp_path / "runs"
    cfg = load_config(DEMO_CONFIG, tiny_loop_overrides(str(runs), tiny_model_config.tiny.cache_dir)
                      + ["loop.iterations=3", "loop.checkpoint_every=1", "loop.staleness=0", "sft.epochs=1",
                         "sft.episodes_per_game=8"])
    killed: list[str] = []
    killer = threading.Thread(target=_kill_rank_after_first_checkpoint, args=(runs, killed), daemon=True)
    killer.start()
    with pytest.raises(LearnerDiedError) as info:
        train(cfg)
    killer.join(timeout=5)
    assert killed, "the learner rank was never killed"
    (root,) = runs.glob("*/")
    message = str(info.value)
    assert "\n" not in message and message.startswith("learner rank 0 died")
    assert message.endswith(f"coplay train --resume {root}")

    resumed = RunDir.open(train(load_config(root / "config.yaml"), resume=root))
    records = resumed.read_metrics()
    assert any("resumed_from" in r for r in records)
    assert {r["iteration"] for r in records if "scores" in r or "reward_parts" in r} >= {1, 2, 3}
    assert records[-1]["final_versions"]["act"] >= 3
