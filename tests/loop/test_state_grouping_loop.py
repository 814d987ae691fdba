"""`rollout.grouping=state` through the whole loop (issue 36): a real local Ray cluster, the vLLM CPU
engine, DeepSpeed and the skill bank, two iterations on 2048 without a cold start. Iteration 2's anchors are
positions its trunks' shards of iteration 1 recorded; the learner steps train the branches' first decisions;
the scores are the trunks'; the bank learns from trunks only."""

from __future__ import annotations

import json

import pytest

from coplay.config import load_config
from coplay.loop import train
from coplay.runs import RunDir
from coplay.types import read_shard
from tests.helpers import DEMO_CONFIG, tiny_loop_overrides

STATE = ["rollout.grouping=state", "rollout.start_states=2", "rollout.group_size=4",
         "rollout.state_groups.trunks=1", "rollout.state_groups.horizon=2", "sft.enabled=false",
         "loop.iterations=2", "probe.every=0"]


def _bytes(state) -> bytes:
    return json.dumps(state, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.slow
def test_state_groups_train_through_the_loop(ray_cluster, tmp_path, tiny_model_config):
    cfg = load_config(DEMO_CONFIG, [*tiny_loop_overrides(str(tmp_path), tiny_model_config.tiny.cache_dir),
                                    *STATE])
    run = RunDir.open(train(cfg))
    shards = {k: [t for path in sorted(run.shards.glob(f"it{k:05d}-*.msgpack"))
                  for t in read_shard(path).trajectories]
              for k in (1, 2)}
    for k, trajectories in shards.items():
        assert sorted(t.kind for t in trajectories) == ["branch"] * 8 + ["trunk"]
        trunk = next(t for t in trajectories if t.kind == "trunk")
        assert len(trunk.steps) == 6 and all(s.state is not None for s in trunk.steps)
        branches = [t for t in trajectories if t.kind == "branch"]
        assert {t.group for t in branches} == {f"it{k}-2048-a0", f"it{k}-2048-a1"}
        for group in {t.group for t in branches}:
            members = [t for t in branches if t.group == group]
            assert len({_bytes(m.steps[0].state) for m in members}) == 1
    recorded = {_bytes(s.state) for t in shards[1] if t.kind == "trunk" for s in t.steps}
    assert {_bytes(t.steps[0].state) for t in shards[2] if t.kind == "branch"} <= recorded
    records = run.read_metrics()
    trained = {r[part]["trained_iteration"]: r[part] for r in records for part in ("train", "final_train")
               if r.get(part) and "trained_iteration" in r[part]}
    assert sorted(trained) == [1, 2]
    for k, step in trained.items():
        assert sorted(step["trained_episodes"]) == sorted(t.episode_id for t in shards[k])
        assert step["reward_parts"]["act"]["n"] == 8  # one decision per branch; trunks' act samples do not
    line = next(r for r in records if r.get("iteration") == 2 and "scores" in r)
    assert line["scores"]["2048"]["n"] == 1  # the trunk's score; branches are not episodes
