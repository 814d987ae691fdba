"""Adapter bundles: the checksum, what verification refuses, and the registry's retire/drain rules.
No model is loaded here except to build the adapter folders."""

from __future__ import annotations

import json
import struct

import pytest

from coplay.artifacts import ADAPTER_CONFIG, ADAPTER_WEIGHTS, bundle_sha256
from coplay.engines.adapters import AdapterRegistry, verify_bundle
from coplay.engines.base import (
    AdapterNotLoaded,
    AdapterRejected,
    GenerationRequest,
    SamplingParams,
    engine_name,
    parse_engine_name,
)


def _with(files, **changes):
    out = dict(files)
    out.update(changes)
    return out


def test_engine_names_round_trip_and_bad_names_are_refused():
    assert engine_name("act", 3) == "act@v3"
    assert parse_engine_name("retrieve@v12") == ("retrieve", 12)
    for bad in ("act", "act@3", "act@v", "@v1", "act@v01", "a b@v1"):
        with pytest.raises(ValueError, match="expected '<adapter>@v<version>'"):
            parse_engine_name(bad)
    with pytest.raises(ValueError):
        GenerationRequest([1, 2], adapter="act")
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(temperature=-1.0)


def test_request_seed_overrides_the_sampling_seed():
    sampling = SamplingParams(seed=5)
    assert GenerationRequest([1], sampling=sampling).effective_seed == 5
    assert GenerationRequest([1], sampling=sampling, seed=9).effective_seed == 9


def test_a_good_bundle_verifies_and_its_checksum_covers_both_files(bundles):
    files, sha = bundles["act@v1"]
    verified = verify_bundle(files, sha, max_rank=8, label="act@v1")
    assert verified.rank == 8 and verified.sha256 == sha
    assert all("lora_A" in n or "lora_B" in n for n in verified.tensor_names)
    config = json.loads(files[ADAPTER_CONFIG])
    config["lora_alpha"] = 17
    assert bundle_sha256(_with(files, **{ADAPTER_CONFIG: json.dumps(config).encode()})) != sha


@pytest.mark.parametrize("fault, message", [
    ("checksum", "checksum mismatch"),
    ("truncated", "truncated"),
    ("trailing", "trailing bytes"),
    ("header", "does not fit"),
    ("config_json", "not JSON"),
    ("not_lora", "not a LoRA config"),
    ("rank", "rank r=8"),
    ("extra_file", "expected exactly"),
    ("missing_file", "expected exactly"),
])
def test_faulty_bundles_are_refused_with_the_reason(bundles, fault, message):
    files, sha = bundles["act@v1"]
    weights = files[ADAPTER_WEIGHTS]
    config = json.loads(files[ADAPTER_CONFIG])
    if fault == "checksum":
        bad, bad_sha = files, bundles["act@v2"][1]
    else:
        bad = {
            "truncated": lambda: _with(files, **{ADAPTER_WEIGHTS: weights[:-100]}),
            "trailing": lambda: _with(files, **{ADAPTER_WEIGHTS: weights + b"\0" * 4}),
            "header": lambda: _with(files, **{ADAPTER_WEIGHTS: struct.pack("<Q", 10**6) + weights[8:64]}),
            "config_json": lambda: _with(files, **{ADAPTER_CONFIG: b"{not json"}),
            "not_lora": lambda: _with(files, **{ADAPTER_CONFIG: json.dumps({**config,
                                                                            "peft_type": "IA3"}).encode()}),
            "rank": lambda: files,
            "extra_file": lambda: _with(files, **{"README.md": b"hello"}),
            "missing_file": lambda: {ADAPTER_WEIGHTS: weights},
        }[fault]()
        bad_sha = bundle_sha256(bad) if set(bad) == set(files) else sha
    max_rank = 4 if fault == "rank" else 8
    with pytest.raises(AdapterRejected, match=message):
        verify_bundle(bad, bad_sha, max_rank=max_rank, label="act@v9")


def test_registry_drains_a_retired_version_before_dropping_it():
    registry = AdapterRegistry()
    label, loaded = registry.begin_load("act", 1, "aa")
    assert (label, loaded) == ("act@v1", False)
    registry.finish_load(label, handle="h1")
    first, second = registry.acquire(label), registry.acquire(label)
    assert registry.in_flight(label) == 2
    assert registry.retire(label) is None  # still in use: not dropped yet
    assert registry.active() == []
    with pytest.raises(AdapterNotLoaded, match="retired"):
        registry.acquire(label)
    assert registry.release(first) is None
    dropped = registry.release(second)
    assert dropped is not None and dropped.handle == "h1"
    assert registry.in_flight(label) == 0


def test_a_version_never_changes_meaning():
    registry = AdapterRegistry()
    label, _ = registry.begin_load("act", 2, "aa")
    registry.finish_load(label, handle="h")
    assert registry.begin_load("act", 2, "aa") == ("act@v2", True)  # same bytes: idempotent
    with pytest.raises(AdapterRejected, match="never change"):
        registry.begin_load("act", 2, "bb")
    registry.retire(label)
    with pytest.raises(AdapterRejected, match="never change"):
        registry.begin_load("act", 2, "bb")


def test_adapters_must_fit_the_base_models_layers(bundles, tiny_model_dir):
    from safetensors.torch import load, save

    from coplay.engines.adapters import base_linear_shapes, check_fits_base

    shapes = base_linear_shapes(tiny_model_dir)
    assert shapes["model.layers.0.self_attn.q_proj"] == (64, 64)  # 2 heads x head_dim 32, hidden 64
    files, sha = bundles["act@v1"]
    check_fits_base(verify_bundle(files, sha, 8, "act@v1"), shapes, "act@v1")
    tensors = load(files[ADAPTER_WEIGHTS])
    name = next(k for k in sorted(tensors) if "q_proj.lora_A" in k)
    narrow = dict(tensors, **{name: tensors[name][:, :32].contiguous()})
    renamed = {k.replace("q_proj", "qq_proj"): v for k, v in tensors.items()}
    for bad_tensors, message in ((narrow, r"needs \[8, 64\]"), (renamed, "which the base model lacks")):
        bad = _with(files, **{ADAPTER_WEIGHTS: save(bad_tensors, metadata={"format": "pt"})})
        with pytest.raises(AdapterRejected, match=message):
            check_fits_base(verify_bundle(bad, bundle_sha256(bad), 8, "act@v9"), shapes, "act@v9")
