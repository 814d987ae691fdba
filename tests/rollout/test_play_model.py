"""`coplay play --policy base`: the tiny model (no adapters) plays 2048, and Avalon and Diplomacy in
self-play, and the trajectories land as shards under --out. The fast variant runs the `hf` engine in-process;
the slow one runs the command as a user would, on the default `vllm` engine (the CPU build here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coplay.cli import main
from coplay.types import read_shard_dir

SEATS = {"2048": 1, "avalon": 5, "diplomacy": 7}


def check_shards(out: Path, game: str, episodes: int, max_steps: int) -> None:
    shards, errors = read_shard_dir(out)
    assert errors == [] and len(shards) == 1
    trajectories = shards[0].trajectories
    assert len(trajectories) == episodes * SEATS[game]
    assert sorted({t.seed for t in trajectories}) == list(range(episodes))
    for traj in trajectories:
        assert traj.game == game and traj.policy == "model" and traj.steps, traj.seat
        assert len(traj.samples) == len(traj.steps)  # one act call per step, no skills, no retrieval
        assert all(s.adapter == "act" and s.adapter_version == 0 and s.completion_ids for s in traj.samples)
        assert all(s.group_id == f"{game}/{traj.role}/seed{traj.seed}" for s in traj.samples)
    if game == "2048":
        assert all(len(t.steps) == max_steps for t in trajectories)  # truncated by --max-steps
    else:  # AEC: at most max_steps decisions in all; parallel: max_steps rounds of every live power
        per_episode = {}
        for t in trajectories:
            per_episode[t.seed] = per_episode.get(t.seed, 0) + len(t.steps)
        limit = max_steps if game == "avalon" else max_steps * SEATS[game]
        assert all(n == limit for n in per_episode.values()), per_episode


def overrides(tiny_model_config, backend: str | None) -> list[str]:
    found = [f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}", "sampling.max_tokens.act=16",
             "engine.max_model_len=4096"]
    return found + ([f"engine.backend={backend}"] if backend else [])


@pytest.mark.parametrize(("game", "episodes", "max_steps"),
                         [("2048", 8, 3), ("avalon", 1, 6), ("diplomacy", 1, 1)])
def test_play_model_writes_shards_hf(game, episodes, max_steps, tmp_path, capsys, tiny_model_config):
    code = main(["play", "--game", game, "--policy", "base", "--episodes", str(episodes), "--max-steps",
                 str(max_steps), "--out", str(tmp_path), *overrides(tiny_model_config, "hf")])
    out = capsys.readouterr().out
    assert code == 0
    assert f"{game}: base, {episodes} episode(s)" in out and "trajectories written to" in out
    check_shards(tmp_path, game, episodes, max_steps)


@pytest.mark.slow
@pytest.mark.parametrize(("game", "episodes", "max_steps"),
                         [("2048", 8, 4), ("avalon", 2, 10), ("diplomacy", 1, 2)])
def test_play_model_cli_on_the_default_vllm_engine(game, episodes, max_steps, tmp_path, tiny_model_config):
    command = [str(Path(sys.executable).with_name("coplay")), "play", "--game", game, "--policy", "base",
               "--episodes", str(episodes), "--max-steps", str(max_steps), "--out", str(tmp_path),
               *overrides(tiny_model_config, None)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "trajectories written to" in done.stdout
    check_shards(tmp_path, game, episodes, max_steps)
