"""The tiny model and LoRA adapters: determinism, distinct adapters, exact save/load."""

from __future__ import annotations

import hashlib

import pytest
import torch

from coplay.config import CoplayConfig, LoraSpec, ModelConfig, TinyModelConfig
from coplay.models.loading import load_base_model
from coplay.models.lora import attach_adapters, load_adapter, save_adapter
from coplay.models.tiny import build_tiny_model


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _randomize(model, name: str, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if f".{name}." in pname and "lora_" in pname:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)


def _logits(model, ids, adapter: str | None):
    with torch.no_grad():
        if adapter is None:
            with model.disable_adapter():
                return model(input_ids=ids).logits
        model.set_adapter(adapter)
        return model(input_ids=ids).logits


def test_tiny_model_is_deterministic_for_a_seed(tmp_path):
    a = build_tiny_model(TinyModelConfig(cache_dir=str(tmp_path / "a")))
    b = build_tiny_model(TinyModelConfig(cache_dir=str(tmp_path / "b")))
    c = build_tiny_model(TinyModelConfig(cache_dir=str(tmp_path / "c"), seed=1))
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _sha(a / name) == _sha(b / name)
    assert _sha(a / "model.safetensors") != _sha(c / "model.safetensors")
    assert build_tiny_model(TinyModelConfig(cache_dir=str(tmp_path / "a"))) == a  # reused, not rebuilt


def test_tiny_model_fits_the_vllm_cpu_constraints_and_chats(tiny_model_config):
    model, tok = load_base_model(tiny_model_config)
    assert model.config.head_dim == 32 and model.config.model_type == "qwen3"
    text = tok.apply_chat_template([{"role": "user", "content": "board 2 4 8\nmove up"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text
    assert len(ids) < len(text) / 2  # the trained BPE merges game text, it does not fall back to bytes


def test_adapters_change_logits_and_save_load_exactly(tiny_model_config, tmp_path):
    specs = CoplayConfig().adapters
    model, tok = load_base_model(tiny_model_config)
    model = attach_adapters(model, specs)
    _randomize(model, "act", 1)
    _randomize(model, "curator", 2)
    ids = torch.tensor([tok("ACTION: up\nboard 2 2 4 8")["input_ids"]])
    base = _logits(model, ids, None)
    act = _logits(model, ids, "act")
    curator = _logits(model, ids, "curator")
    retrieve = _logits(model, ids, "retrieve")  # fresh adapter: B = 0, so identical to the base
    assert not torch.allclose(base, act, atol=1e-4)
    assert not torch.allclose(act, curator, atol=1e-4)
    assert torch.equal(base, retrieve)

    folder = save_adapter(model, "act", tmp_path / "act" / "v1")
    assert (folder / "adapter_model.safetensors").is_file() and (folder / "adapter_config.json").is_file()
    fresh, _ = load_base_model(tiny_model_config)
    fresh = attach_adapters(fresh, specs)
    load_adapter(fresh, "act", folder)
    assert torch.equal(_logits(fresh, ids, "act"), act)


def test_lora_specs_follow_config():
    from coplay.models.lora import peft_config

    cfg = peft_config(LoraSpec(r=4, alpha=8, dropout=0.0, target_modules=["q_proj"]))
    assert cfg.r == 4 and cfg.lora_alpha == 8 and set(cfg.target_modules) == {"q_proj"}


def test_lora_on_the_top_layers_only_is_placed_saved_and_reloaded_the_same(tiny_model_config, tmp_path):
    import json

    spec = LoraSpec(r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "down_proj"], top_layers=1)
    model, tok = load_base_model(tiny_model_config)
    top = model.config.num_hidden_layers - 1
    model = attach_adapters(model, {"act": spec}, names=("act",))
    adapted = {n.split(".layers.")[1].split(".")[0] for n, _ in model.named_parameters() if "lora_" in n}
    assert adapted == {str(top)}  # only the top layer carries LoRA weights
    _randomize(model, "act", 3)
    ids = torch.tensor([tok("ACTION: up\nboard 2 2 4 8")["input_ids"]])
    act = _logits(model, ids, "act")
    folder = save_adapter(model, "act", tmp_path / "act")
    assert json.loads((folder / "adapter_config.json").read_text())["layers_to_transform"] == [top]
    fresh, _ = load_base_model(tiny_model_config)
    fresh = attach_adapters(fresh, {"act": spec}, names=("act",))
    load_adapter(fresh, "act", folder)
    assert torch.equal(_logits(fresh, ids, "act"), act)
    deep = spec.with_values({"top_layers": 99})  # N beyond the model's depth: every layer
    whole = attach_adapters(load_base_model(tiny_model_config)[0], {"act": deep}, names=("act",))
    assert len({n.split(".layers.")[1].split(".")[0] for n, _ in whole.named_parameters() if "lora_" in n}) \
        == top + 1


def test_missing_local_model_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="name"):
        load_base_model(ModelConfig(name="no-such-model"))
