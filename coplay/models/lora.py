"""LoRA specs for the adapters (five; `propose` too with the curriculum on) and their save/load as standard
PEFT folders.

One base model holds every adapter by name (`act`, `retrieve`, ...). A saved adapter is a folder with
`adapter_model.safetensors` + `adapter_config.json` that vLLM's `LoRARequest` and `PeftModel` both load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coplay.config import LoraSpec, active_adapters


def adapted_layers(spec: LoraSpec, num_layers: int) -> list[int] | None:
    """The decoder layer indices `spec` adapts (the top `top_layers`), or None for all of them."""
    if spec.top_layers is None or spec.top_layers >= num_layers:
        return None
    return list(range(num_layers - spec.top_layers, num_layers))


def num_decoder_layers(model: Any) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(config.num_hidden_layers)


def peft_config(spec: LoraSpec, num_layers: int | None = None) -> Any:
    """The PEFT config of `spec` for a model of `num_layers` decoder layers (needed when `top_layers` is
    set). The saved adapter_config.json carries `layers_to_transform`, so every loader (the learner, the
    hf engine, a resumed run) rebuilds the same placement; vLLM reads the placement from which tensors the
    bundle holds, which are exactly those layers'."""
    from peft import LoraConfig

    layers = adapted_layers(spec, num_layers) if num_layers is not None else None
    if spec.top_layers is not None and num_layers is None:
        raise ValueError("LoRA top_layers needs the model's number of layers")
    return LoraConfig(
        r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
        target_modules=list(spec.target_modules), bias="none", task_type="CAUSAL_LM",
        layers_to_transform=layers,
    )


def attach_adapters(base: Any, specs: dict[str, LoraSpec],
                    names: tuple[str, ...] = active_adapters(False)) -> Any:
    """Wrap `base` in a PeftModel holding one named adapter per entry of `names` (fresh: B = 0).

    Returned in eval mode (PEFT switches to train mode, which turns LoRA dropout on and makes logits
    random); a trainer calls `.train()` itself."""
    from peft import get_peft_model

    layers = num_decoder_layers(base)
    first, *rest = names
    model = get_peft_model(base, peft_config(specs[first], layers), adapter_name=first)
    for name in rest:
        model.add_adapter(name, peft_config(specs[name], layers))
    model.set_adapter(first)
    model.eval()
    return model


def adapter_state(model: Any, name: str) -> dict[str, Any]:
    """The LoRA tensors of adapter `name` (keys as PEFT saves them)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model, adapter_name=name)


def saved_name(parameter_name: str, adapter: str) -> str:
    """A LoRA parameter's name in the model (`...q_proj.lora_A.act.weight`) as PEFT saves it
    (`...q_proj.lora_A.weight`)."""
    for part in ("lora_A", "lora_B"):
        parameter_name = parameter_name.replace(f".{part}.{adapter}.", f".{part}.")
    return parameter_name


def save_adapter(model: Any, name: str, out_dir: str | Path,
                 weights: dict[str, Any] | None = None) -> Path:
    """Save adapter `name` as a standalone PEFT folder at `out_dir` (not PEFT's `<dir>/<name>/` nesting).
    `weights` (by parameter name, e.g. the optimizer's float32 master) replace the module's own tensors."""
    from peft.utils import SAFETENSORS_WEIGHTS_NAME
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in adapter_state(model, name).items()}
    if weights is not None:
        given = {saved_name(k, name): v for k, v in weights.items()}
        if set(given) != set(state):
            raise ValueError(f"save_adapter {name!r}: the weights given name {len(given)} tensors, the "
                             f"adapter has {len(state)} (e.g. {sorted(set(given) ^ set(state))[:2]})")
        state = {k: given[k].detach().to("cpu").contiguous() for k in state}
    save_file(state, str(out / SAFETENSORS_WEIGHTS_NAME), metadata={"format": "pt"})
    model.peft_config[name].save_pretrained(str(out))
    return out


def load_adapter(model: Any, name: str, folder: str | Path) -> None:
    """Load the PEFT folder into `model` as adapter `name` (replacing its weights if it exists)."""
    from peft import set_peft_model_state_dict
    from peft.utils import SAFETENSORS_WEIGHTS_NAME
    from safetensors.torch import load_file

    state = load_file(str(Path(folder) / SAFETENSORS_WEIGHTS_NAME))
    if name not in model.peft_config:
        from peft import PeftConfig

        model.add_adapter(name, PeftConfig.from_pretrained(str(folder)))
    result = set_peft_model_state_dict(model, state, adapter_name=name)
    if result.unexpected_keys:
        raise ValueError(f"adapter {folder}: unexpected tensors {result.unexpected_keys[:5]} for {name!r}")


def randomize_adapter(model: Any, name: str, seed: int, scale: float = 0.1) -> None:
    """Give adapter `name` random non-zero weights: A uniform in [-0.2, 0.2], B normal with std `scale`. A
    fresh adapter has B = 0 and changes nothing; tests and benchmarks need one that changes what the model
    says (engine parity, hot swap, throughput with adapters)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            if f"lora_A.{name}." in param_name:
                param.data.uniform_(-0.2, 0.2, generator=generator)
            elif f"lora_B.{name}." in param_name:
                param.data.normal_(0.0, scale, generator=generator)


def random_adapter_folder(model_cfg: Any, out_dir: str | Path, seed: int, spec: LoraSpec | None = None,
                          name: str = "act", scale: float = 0.1) -> Path:
    """A PEFT folder holding one adapter of the base model `model_cfg` with random non-zero weights."""
    from coplay.models.loading import load_base_model

    base, _ = load_base_model(model_cfg)
    model = attach_adapters(base, {name: spec or LoraSpec(r=8, alpha=16, dropout=0.0)}, names=(name,))
    randomize_adapter(model, name, seed, scale)
    return save_adapter(model, name, out_dir)
