"""One iteration on every game at once (short horizons), self-play seats for Avalon and Diplomacy, and the
synchronous schedule's determinism (slow)."""

from __future__ import annotations

import json
import re

import pytest

from coplay.config import GAME_KEYS, load_config
from coplay.loop import train
from coplay.runs import RunDir
from coplay.types import read_shard
from tests.helpers import DEMO_CONFIG, tiny_loop_overrides

SMOKE = ["games=[2048, candy_crush, tetris, mario, avalon, diplomacy]", "sft.enabled=false",
         "loop.iterations=1", "loop.staleness=0", "rollout.start_states=1", "rollout.group_size=2",
         "rollout.max_steps=3", "rollout.opponents={current: 0.4, frozen: 0.0, expert: 0.3, random: 0.3}",
         "engine.max_model_len=4096", "loop.checkpoint_every=1"]


def test_one_iteration_on_every_game(ray_cluster, tmp_path, tiny_model_config, capsys):
    cfg = load_config(DEMO_CONFIG, [*tiny_loop_overrides(str(tmp_path), tiny_model_config.tiny.cache_dir),
                                    *SMOKE, "logging.console=true"])
    run = RunDir.open(train(cfg))
    # without a terminal the rollouts' phase ends with the steps its episodes played
    err = capsys.readouterr().err
    played = re.search(r"iteration 1: rollouts: done in [0-9.]+ s, (\d+) steps", err)
    assert played is not None and int(played.group(1)) > 0, err[-2000:]
    trajectories = [t for p in run.shards.glob("it00001-*.msgpack") for t in read_shard(p).trajectories]
    assert {t.game for t in trajectories} == set(GAME_KEYS)
    for game in ("avalon", "diplomacy"):
        seats = {t.seat for t in trajectories if t.game == game}
        assert len(seats) >= 2, f"{game}: self-play produced trajectories for {seats}"
    # Diplomacy seats all act each round; the learner's scheduled Avalon seat may not act in 3 decisions
    assert any(t.policy == "model" for t in trajectories if t.game == "diplomacy")
    line = next(r for r in run.read_metrics() if r.get("iteration") == 1 and "scores" in r)
    # scores are the learner's: every game but Avalon, whose learner seat may not have acted yet
    assert set(line["scores"]) >= set(GAME_KEYS) - {"avalon"}
    assert line["train"]["learner_step"] == 1
    # the league rated the Diplomacy games (3 rounds: cut-off Avalon games carry no ranking) and persisted
    assert "act@v0" in line["league"]["diplomacy"]
    assert json.loads((run.root / "league.json").read_text())["ratings"]["diplomacy"]
    assert "diplomacy" in line["learner_seats"]


def _adapter_shas(run: RunDir) -> dict[str, str]:
    return {str(p.parent.relative_to(run.root)): json.loads(p.read_text())["sha256"]
            for p in sorted(run.root.glob("adapters/*/v*/manifest.json"))}


@pytest.mark.slow
def test_synchronous_runs_with_the_same_seed_give_identical_adapters(ray_cluster, tmp_path,
                                                                      tiny_model_config):
    overrides = [*tiny_loop_overrides(str(tmp_path), tiny_model_config.tiny.cache_dir), "loop.staleness=0",
                 "loop.iterations=2", "sft.epochs=1"]
    first = RunDir.open(train(load_config(DEMO_CONFIG, [*overrides, "run.name=a"])))
    second = RunDir.open(train(load_config(DEMO_CONFIG, [*overrides, "run.name=b"])))
    assert _adapter_shas(first) == _adapter_shas(second)
    assert len(_adapter_shas(first)) > 5
