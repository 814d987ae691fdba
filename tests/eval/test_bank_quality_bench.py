"""benchmarks/bank_quality.py: every bank version of a run measured on the one pool of trajectories that the
run's updates held out, so that the seed bank and the final bank are compared on the same segments (each
update records its quality on its own iteration's held-out trajectories only)."""

from __future__ import annotations

import json

from benchmarks.bank_quality import main, measure
from coplay.config import CoplayConfig
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.skills import Bank, update_bank
from coplay.skills.teacher import TeacherCaller
from coplay.types import Shard, write_shard


def _run(tmp_path):
    """A run folder: 2 iterations of 4 expert 2048 episodes each, the seed bank (v1) and an empty v2."""
    run = tmp_path / "run"
    (run / "banks" / "2048").mkdir(parents=True)
    (run / "config.yaml").write_text("games: ['2048']\n")
    for iteration, first in ((1, 10), (2, 20)):
        trajectories = play_bot_episodes("2048", "expert", list(range(first, first + 4)), max_steps=40)
        write_shard(run / "shards" / f"it{iteration:05d}-w000-0000.msgpack",
                    Shard(f"it{iteration}", iteration, 0, trajectories))
    cfg = CoplayConfig().skill_bank.with_values({"use_model": True})
    seed, _, _ = update_bank(Bank(bank_key="2048"), play_bot_episodes("2048", "expert", [0, 1, 2], 60),
                             TeacherCaller(), cfg, 0)
    seed.version = 1
    empty = Bank(bank_key="2048", version=2)
    for bank in (seed, empty):
        (run / "banks" / "2048" / f"v{bank.version}.json").write_bytes(bank.to_bytes())
    return run, seed


def test_every_version_is_measured_on_the_trajectories_the_updates_held_out(tmp_path):
    run, seed = _run(tmp_path)
    assert len(seed.skills) >= 1
    result = measure(run, "2048")
    # every 4th trajectory of each iteration by episode id: seeds 13 and 23
    assert result["heldout"]["trajectories"] == 2 and result["heldout"]["steps"] == 80
    first, last = result["versions"]
    assert (first["version"], last["version"]) == (1, 2)
    assert first["segments"] > 0 and last["segments"] > 0  # one pool, each version's own segmentation
    assert first["coverage"] > 0 and first["labelled"] > 0
    assert last["quality"] == 0.0 and last["labelled"] == 0  # an empty bank covers nothing
    paired = result["paired_per_trajectory"]["v2 minus v1"]
    assert paired["n"] == 2 and paired["difference"] < 0


def test_the_command_writes_its_json(tmp_path, capsys):
    run, _ = _run(tmp_path)
    out = tmp_path / "q.json"
    assert main([str(run), "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["bank"] == "2048" and written == json.loads(capsys.readouterr().out)
