"""The multi-adapter learner: idle adapters bit-identical (torch, ZeRO-2, ZeRO-3), learning moves the loss,
exact resume in a fresh process, publishing, refusal of corrupt or mismatched checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from scenarios import batch, make_learner

from coplay.learn.distributed import free_port, lone_process_env

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def cache(tiny_model_config) -> str:
    return tiny_model_config.tiny.cache_dir


def _curator_state(learner) -> dict[str, torch.Tensor]:
    return {**{f"w/{k}": v for k, v in learner.adapter_weights("curator").items()},
            **{f"o/{k}": v for k, v in learner.optimizer_state("curator").items()}}


@pytest.mark.parametrize(("backend", "stage", "offload"),
                         [("torch", 2, False), ("deepspeed", 2, False), ("deepspeed", 3, False),
                          ("deepspeed", 2, True)])
def test_idle_adapter_stays_bit_identical(cache, backend, stage, offload):
    learner = make_learner(cache, backend, stage, offload_optimizer=offload)
    for step in range(3):
        samples, adv = batch(step, ("curator",))
        learner.train_step(samples, adv)
    before = _curator_state(learner)
    assert any(k.startswith("o/") and "exp_avg_sq" in k for k in before), \
        "curator must have optimizer moments"
    act_before = learner.adapter_weights("act")
    for step in range(3, 6):
        samples, adv = batch(step, ("act",))
        metrics = learner.train_step(samples, adv)
        assert set(metrics.adapters) == {"act"}
        parts = {k: metrics.seconds[k] for k in ("reference_s", "forward_s", "backward_s", "optimizer_s")}
        assert min(parts.values()) > 0 and sum(parts.values()) <= metrics.seconds["step_s"], metrics.seconds
    after = _curator_state(learner)
    assert before.keys() == after.keys()
    for key in before:
        assert torch.equal(before[key], after[key]), f"{backend} zero{stage}: curator {key} changed"
    assert any(not torch.equal(act_before[k], v) for k, v in learner.adapter_weights("act").items())
    assert learner.versions == {"act": 3, "curator": 3} and learner.learner_step == 6


def _run_scenario(args: list[str], ranks: int = 1, timeout: int = 600) -> None:
    if ranks == 1:
        cmd = [sys.executable, str(HERE / "scenarios.py"), *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(HERE / "scenarios.py"), *args]
    env = lone_process_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE.parent.parent,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]


def _assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


def resume_matches_straight_run(cache: str, tmp_path: Path, backend: str, stage: int) -> None:
    """4 steps straight == 2 steps + checkpoint + fresh process + resume + 2 steps (weights and moments)."""
    from safetensors.torch import load_file
    from scenarios import RESUME_PLAN, snapshot

    learner = make_learner(cache, backend, stage)
    for step in (1, 2):
        learner.train_step(*batch(step, RESUME_PLAN[step]))
    learner.save_checkpoint(tmp_path / "ckpt", bank_version=3, data_cursor={"shard": 2})
    for step in (3, 4):
        learner.train_step(*batch(step, RESUME_PLAN[step]))
    straight = snapshot(learner)
    out = tmp_path / "resumed.safetensors"
    _run_scenario(["--cache", cache, "--backend", backend, "--stage", str(stage), "--steps", "3,4",
                   "--resume", str(tmp_path / "ckpt"), "--out", str(out)])
    _assert_same(straight, load_file(str(out)))


def test_resume_in_a_fresh_process_is_bit_exact_torch(cache, tmp_path):
    resume_matches_straight_run(cache, tmp_path, "torch", 2)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_resume_in_a_fresh_process_is_bit_exact_deepspeed(cache, tmp_path, stage):
    resume_matches_straight_run(cache, tmp_path, "deepspeed", stage)


def test_checkpoint_holds_counters_and_refuses_corruption_and_mismatch(cache, tmp_path):
    from coplay.learn.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint

    learner = make_learner(cache, "torch")
    learner.train_step(*batch(1, ("act",)))
    root = tmp_path / "checkpoints"
    learner.save_checkpoint(root / "step-1", bank_version=5, data_cursor={"shard": "it00001"})
    (root / ".step-2.tmp-2").mkdir()  # a crash mid-write leaves a temp folder: never picked up
    assert latest_checkpoint(root) == root / "step-1"
    fresh = make_learner(cache, "torch")
    state = fresh.load_checkpoint(root / "step-1")
    assert (state.learner_step, state.bank_version, state.data_cursor) == (1, 5, {"shard": "it00001"})
    assert fresh.versions == {"act": 1, "curator": 0}
    other = make_learner(cache, "torch", names=("act",))
    with pytest.raises(CheckpointError, match="state.json"):
        load_checkpoint(other, root / "step-1")
    weights = root / "step-1" / "adapters.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="adapters.safetensors"):
        fresh.load_checkpoint(root / "step-1")


def test_publish_writes_changed_adapters_as_verified_versions(cache, tmp_path):
    from peft import AutoPeftModelForCausalLM

    from coplay.artifacts import ArtifactError, read_adapter_version
    from coplay.models.lora import load_adapter

    learner = make_learner(cache, "torch")
    learner.train_step(*batch(1, ("curator",)))
    versions = learner.publish(tmp_path / "adapters")
    assert [(v.adapter, v.version, v.learner_step, v.engine_name) for v in versions] == [
        ("curator", 1, 1, "curator@v1")]
    folder = Path(versions[0].path)
    assert folder == tmp_path / "adapters" / "curator" / "v1"
    assert read_adapter_version(folder)[1] == versions[0]
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == learner.base_model  # also for adapters after the first
    stock = AutoPeftModelForCausalLM.from_pretrained(folder)  # a stock PEFT user opens it with no coplay code
    assert stock.active_adapter == "default"
    other = make_learner(cache, "torch")
    load_adapter(other.policy, "curator", folder)
    for name, tensor in learner.adapter_weights("curator").items():
        assert torch.equal(tensor, other.adapter_weights("curator")[name])
    with pytest.raises(ArtifactError, match="never overwritten"):
        learner.publish(tmp_path / "adapters")  # a version is never overwritten
    (folder / "adapter_model.safetensors").write_bytes(b"corrupt")
    with pytest.raises(ArtifactError, match="adapter_model.safetensors"):
        read_adapter_version(folder)


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_two_deepspeed_ranks_match_one_torch_rank(cache, tmp_path, stage):
    """2 ranks (gloo), ZeRO-2 / ZeRO-3, 3 steps == single-rank plain torch on the same data (rtol 1e-4, atol
    1e-6); on both ranks the adapter idle at step 3 stays bit-identical (weights and moment partitions)."""
    from safetensors.torch import load_file
    from scenarios import RESUME_PLAN

    out = tmp_path / "two-ranks.safetensors"
    _run_scenario(["--cache", cache, "--backend", "deepspeed", "--stage", str(stage), "--steps", "1,2,3",
                   "--out", str(out), "--publish", str(tmp_path / "adapters")], ranks=2)
    learner = make_learner(cache, "torch")
    for step in (1, 2, 3):
        learner.train_step(*batch(step, RESUME_PLAN[step]))
    two = load_file(str(out))
    for adapter in learner.adapter_names:
        for name, expected in learner.adapter_weights(adapter).items():
            torch.testing.assert_close(two[f"w/{adapter}/{name}"], expected, rtol=1e-4, atol=1e-6)
        assert any(not torch.equal(v, torch.zeros_like(v)) for v in learner.adapter_weights(adapter).values())
    # rank 0 published the adapter of the last step (act@v3), gathered from both ranks under ZeRO-3
    from coplay.artifacts import read_adapter_version

    published = read_adapter_version(tmp_path / "adapters" / "act" / "v3")[1]
    assert (published.version, published.learner_step) == (3, 3)
    assert not (tmp_path / "adapters" / "curator").exists()
    exported = load_file(str(Path(published.path) / "adapter_model.safetensors"))
    for name, tensor in exported.items():
        full = next(v for k, v in two.items()
                    if k.startswith("w/act/") and k.endswith(name.replace(".weight", ".act.weight")))
        assert torch.equal(tensor, full)


@pytest.mark.slow
def test_two_zero3_ranks_with_mini_batches_match_one_torch_rank(cache, tmp_path):
    """`learner.mini_batches` on 2 ZeRO-3 ranks: every rank cuts the same mini-batches and runs the same
    forwards (the no-grad scoring pass included, also where one rank's rows are all stale), so 3 steps of
    2 updates per epoch match one torch rank."""
    from safetensors.torch import load_file
    from scenarios import RESUME_PLAN, mixed_versions

    out = tmp_path / "two-ranks-mini.safetensors"
    _run_scenario(["--cache", cache, "--backend", "deepspeed", "--stage", "3", "--steps", "1,2,3",
                   "--mini-batches", "2", "--mixed-versions", "--out", str(out)], ranks=2, timeout=300)
    learner = make_learner(cache, "torch", mini_batches=2)
    for step in (1, 2, 3):
        samples, adv = batch(step, RESUME_PLAN[step])
        metrics = learner.train_step(mixed_versions(samples, learner.versions), adv)
        assert metrics.adapters["act"]["updates"] == 4.0
    two = load_file(str(out))
    for adapter in learner.adapter_names:
        for name, expected in learner.adapter_weights(adapter).items():
            # atol 1e-5: the stale rows' ratios sit at the clip edges, where rounding moves more
            torch.testing.assert_close(two[f"w/{adapter}/{name}"], expected, rtol=1e-4, atol=1e-5)


def test_a_run_and_the_standalone_learner_publish_the_same_bytes(cache, tmp_path):
    """`python -m coplay.learn` (Learner.publish) and a run (Learner.export -> the ArtifactStore's ledger)
    write the same files, the same manifest and the same sha256 for the same weights."""
    from coplay.artifacts import BUNDLE_FILES, ArtifactLedger
    from coplay.runs import RunDir

    learner = make_learner(cache, "torch")
    learner.train_step(*batch(1, ("act", "curator")))
    standalone = {v.adapter: v for v in learner.publish(tmp_path / "standalone")}
    run = RunDir.create(tmp_path, "run", "{}\n")
    ledger = ArtifactLedger(run)
    for adapter, bundle in learner.export(sorted(learner.changed)).items():
        version = learner.versions[adapter]
        record = ledger.publish_adapter(adapter, version, bundle.files, bundle.sha256, learner.learner_step)
        assert record.sha256 == standalone[adapter].sha256
        for name in (*BUNDLE_FILES, "manifest.json"):
            ours = (run.adapter_dir(adapter, version) / name).read_bytes()
            assert ours == (Path(standalone[adapter].path) / name).read_bytes(), f"{adapter} {name}"
    assert sorted(standalone) == ["act", "curator"]
