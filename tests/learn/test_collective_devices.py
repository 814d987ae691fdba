"""Collectives on the backend's device: the learner's distributed code on two gloo ranks under a checker that
pretends the backend is NCCL (`nccl_checker.py`), so a collective on a CPU tensor — which NCCL refuses at the
first SFT batch of a two-GPU run — fails here, on a machine without a GPU. Also the helpers' device rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from nccl_checker import SFT_EXAMPLES
from scenarios import batch, make_learner

from coplay.learn.distributed import backend_device_types, free_port, lone_process_env

HERE = Path(__file__).parent


def test_backend_device_types():
    assert backend_device_types("nccl") == ("cuda",)
    assert backend_device_types("gloo") == ("cpu",)
    assert backend_device_types("cpu:gloo,cuda:nccl") == ("cpu", "cuda")
    with pytest.raises(ValueError, match="'hccl'"):
        backend_device_types("hccl")


def test_learner_collectives_on_two_ranks_are_on_the_nccl_device(tiny_model_config, tmp_path):
    """2 gloo ranks, pretend NCCL: SFT batches, a GRPO step of two adapters, a checkpoint save and load run
    with every collective's tensors on cuda:0 (the checker refuses a CPU tensor, and did so at the start of
    each rank); the result equals one rank's on the same data (the sums really travel and come back)."""
    from safetensors.torch import load_file

    cache = tiny_model_config.tiny.cache_dir
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(HERE / "nccl_checker.py"), "--cache", cache,
           "--ckpt", str(tmp_path / "ckpt"), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=HERE.parent.parent,
                          env=lone_process_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.loads(Path(f"{out}.rank{r}").read_text()) for r in (0, 1)]
    for result in ranks:
        assert result["refused_cpu"], "the checker let a CPU tensor through a pretend-NCCL all_reduce"
        ops = {entry["op"] for entry in result["collectives"]}
        assert {"all_reduce", "barrier", "broadcast_object_list"} <= ops, ops
        assert all(d == "cuda:0" for entry in result["collectives"] for d in entry["devices"])
    assert ranks[0]["sft_losses"] == ranks[1]["sft_losses"]

    from coplay.learn.sft import SftSession

    learner = make_learner(cache, "torch")
    sft = SftSession(learner, [("act", SFT_EXAMPLES, 1)], lr=1e-3, batch_size=4)
    assert [loss for _, loss in sft.run()] == pytest.approx(ranks[0]["sft_losses"], rel=1e-5)
    learner.train_step(*batch(1, ("act", "curator")))
    two = load_file(f"{out}.rank0.safetensors")
    for adapter in learner.adapter_names:
        for name, expected in learner.adapter_weights(adapter).items():
            # atol 5e-5: summed over two ranks the gradients round differently; on an AVX-512 machine one
            # element of 256 ended 1.9e-5 apart from one rank's (the step's lr is 5e-3)
            torch.testing.assert_close(two[f"w/{adapter}/{name}"], expected, rtol=1e-4, atol=5e-5)
