"""LoRA specs for the five adapters and their save/load as standard PEFT folders.

One base model holds every adapter by name (`act`, `retrieve`, ...). A saved adapter is a folder with
`adapter_model.safetensors` + `adapter_config.json` that vLLM's `LoRARequest` and `PeftModel` both load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coplay.config import ADAPTER_NAMES, LoraSpec


def peft_config(spec: LoraSpec) -> Any:
    from peft import LoraConfig

    return LoraConfig(
        r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
        target_modules=list(spec.target_modules), bias="none", task_type="CAUSAL_LM",
    )


def attach_adapters(base: Any, specs: dict[str, LoraSpec], names: tuple[str, ...] = ADAPTER_NAMES) -> Any:
    """Wrap `base` in a PeftModel holding one named adapter per entry of `names` (fresh: B = 0).

    Returned in eval mode (PEFT switches to train mode, which turns LoRA dropout on and makes logits
    random); a trainer calls `.train()` itself."""
    from peft import get_peft_model

    first, *rest = names
    model = get_peft_model(base, peft_config(specs[first]), adapter_name=first)
    for name in rest:
        model.add_adapter(name, peft_config(specs[name]))
    model.set_adapter(first)
    model.eval()
    return model


def adapter_state(model: Any, name: str) -> dict[str, Any]:
    """The LoRA tensors of adapter `name` (keys as PEFT saves them)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model, adapter_name=name)


def save_adapter(model: Any, name: str, out_dir: str | Path) -> Path:
    """Save adapter `name` as a standalone PEFT folder at `out_dir` (not PEFT's `<dir>/<name>/` nesting)."""
    from peft.utils import SAFETENSORS_WEIGHTS_NAME
    from safetensors.torch import save_file

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").contiguous() for k, v in adapter_state(model, name).items()}
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
