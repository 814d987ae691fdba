"""`python -m coplay.learn`: trains from reward-carrying shards, publishes, checkpoints, resumes."""

from __future__ import annotations

import json

from coplay.learn.__main__ import main
from coplay.types import Sample, Shard, Step, Trajectory, write_shard


def _shard(index: int) -> Shard:
    trajs = []
    for e in range(3):
        samples, steps = [], []
        for t in range(2):
            sid = f"{index}-{e}-{t}"
            samples.append(Sample(adapter="act", adapter_version=0, prompt_ids=[5 + e, 6, 7],
                                  completion_ids=[30 + t, 31], logprobs=[-7.5, -7.6], group_id="2048/1",
                                  reward=float(e + t), sample_id=sid))
            steps.append(Step(t=t, observation="", action="left", reward=1.0, score=0.0, sample_ids=[sid]))
        trajs.append(Trajectory(episode_id=f"{index}-{e}", game="2048", seat="solo", role="solo", seed=1,
                                steps=steps, samples=samples))
    return Shard(shard_id=str(index), iteration=index, worker=0, trajectories=trajs)


def test_standalone_learner_trains_publishes_and_resumes(tiny_model_config, tmp_path, capsys):
    shards = tmp_path / "shards"
    for i in range(2):
        write_shard(shards / f"it{i:05d}-w000-0000.msgpack", _shard(i))
    (shards / "it00002-w000-0000.msgpack").write_bytes(b"not a shard")
    out = tmp_path / "out"
    overrides = [f"model.tiny.cache_dir={tiny_model_config.tiny.cache_dir}", "model.dtype=float32",
                 "learner.backend=torch", "loop.checkpoint_every=1", "learner.lr=1e-3"]
    assert main(["--shards", str(shards), "--out", str(out), *overrides]) == 0
    assert "skipping" in capsys.readouterr().err
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["published"] for r in records] == [["act@v1"], ["act@v2"]]
    assert records[0]["adapters"]["act"]["samples"] == 6.0
    assert (out / "adapters" / "act" / "v2" / "adapter_model.safetensors").is_file()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-1", "step-2"]
    write_shard(shards / "it00003-w000-0000.msgpack", _shard(3))
    assert main(["--shards", str(shards), "--out", str(out), "--resume", *overrides]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["learner_step"] == 3 and records[-1]["published"] == ["act@v3"]
