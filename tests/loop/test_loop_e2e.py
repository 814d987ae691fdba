"""The co-evolution loop end to end on a real local Ray cluster: vLLM CPU engine, DeepSpeed, skill bank."""

from __future__ import annotations

import json

from coplay.config import ADAPTER_NAMES, load_config
from coplay.loop import train
from coplay.runs import RunDir
from tests.loop.conftest import tiny_loop_overrides


def _manifest_sha(run: RunDir, adapter: str, version: int) -> str:
    return json.loads((run.adapter_dir(adapter, version) / "manifest.json").read_text())["sha256"]


def test_two_iterations_on_2048_train_every_adapter(ray_cluster, tmp_path, tiny_model_config):
    cfg = load_config(overrides=tiny_loop_overrides(str(tmp_path / "runs"), tiny_model_config.tiny.cache_dir))
    run = RunDir.open(train(cfg))
    records = run.read_metrics()
    final = records[-1]
    newest = final["final_versions"]
    for adapter in ADAPTER_NAMES:
        assert newest[adapter] >= 1, f"{adapter} was never trained: {newest}"
        assert _manifest_sha(run, adapter, newest[adapter]) != _manifest_sha(run, adapter, 0), adapter
    trained = [r.get("train") or r.get("final_train") for r in records if r.get("train") or r.get("final_train")]
    varied = {a for t in trained for a, n in t.get("nonzero_advantages", {}).items() if n > 0}
    assert varied == set(ADAPTER_NAMES), f"adapters without a group of non-zero reward variance: {set(ADAPTER_NAMES) - varied}"
    assert final["final_bank_versions"]["2048"] > records[0]["bank_versions"]["2048"]
    for name, acks in final["acknowledgements"].items():
        assert set(acks) == {"worker-0"}, f"{name} not acknowledged by every worker: {acks}"
    for line in records[1:3]:
        assert line["versions"]["act"] >= 1 and line["scores"]["2048"]["n"] == 4
    assert (run.root / "tb").iterdir()
    assert list(run.shards.glob("it00001-*.msgpack")) and list(run.root.glob("checkpoints/step-2/state.json"))
