"""Adapter bundles: the bytes of one LoRA adapter version, and the one checksum that names them.

A bundle is exactly two files of a standard PEFT folder, `adapter_config.json` and
`adapter_model.safetensors`. Its checksum (`bundle_sha256`) is sha256 over, for each of those two names in
that order, name (UTF-8) + b"\\0" + length of the bytes (8-byte big-endian) + the bytes.

Every bundle is made by `export_bundle` (the learner) or read back from a version folder, so the same
weights give the same bytes wherever they are written (`python -m coplay.learn` or a run): the config is
canonical (sorted keys and target modules: PEFT keeps them as a set, whose order follows the process's hash
seed) and names its base model, so stock `AutoPeftModelForCausalLM.from_pretrained(folder)` opens it.
Standard library at import time (peft and safetensors only inside `export_bundle`); never ray.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
BUNDLE_FILES = (ADAPTER_CONFIG, ADAPTER_WEIGHTS)


class ArtifactError(RuntimeError):
    """An artifact (adapter bundle or bank version) that cannot be published, delivered or trusted. The
    message names the artifact or the file and what is wrong."""


def bundle_sha256(files: dict[str, bytes]) -> str:
    """The canonical checksum of an adapter bundle (module docstring)."""
    digest = hashlib.sha256()
    for name in BUNDLE_FILES:
        data = files[name]
        digest.update(name.encode() + b"\0" + struct.pack(">Q", len(data)))
        digest.update(data)
    return digest.hexdigest()


@dataclass(frozen=True)
class AdapterBundle:
    """The two files of one adapter version and their checksum."""

    files: dict[str, bytes]
    sha256: str

    @classmethod
    def of(cls, files: dict[str, bytes]) -> AdapterBundle:
        """A bundle of exactly the two bundle files, its checksum computed from the bytes."""
        missing = [name for name in BUNDLE_FILES if name not in files]
        if missing:
            raise ArtifactError(f"adapter bundle lacks {missing}; expected exactly {list(BUNDLE_FILES)}")
        kept = {name: bytes(files[name]) for name in BUNDLE_FILES}
        return cls(kept, bundle_sha256(kept))

    @classmethod
    def read(cls, folder: str | Path) -> AdapterBundle:
        """The bundle files of a PEFT folder."""
        root = Path(folder)
        missing = [name for name in BUNDLE_FILES if not (root / name).is_file()]
        if missing:
            raise ArtifactError(f"adapter folder {root}: missing {missing} (expected {list(BUNDLE_FILES)})")
        return cls.of({name: (root / name).read_bytes() for name in BUNDLE_FILES})

    @property
    def config(self) -> dict[str, Any]:
        return json.loads(self.files[ADAPTER_CONFIG])


def canonical_adapter_config(config: dict[str, Any], base_model: str | None) -> bytes:
    """A PEFT adapter config as canonical bytes: sorted keys and target modules, and the base model named
    (`base_model_name_or_path`; PEFT leaves it None for every adapter added after the first)."""
    config = dict(config)
    if isinstance(config.get("target_modules"), list | tuple | set):
        config["target_modules"] = sorted(config["target_modules"])
    if base_model is not None:
        config["base_model_name_or_path"] = base_model
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()


def export_bundle(policy: Any, adapter: str, base_model: str | None,
                  weights: dict[str, Any] | None = None) -> AdapterBundle:
    """The bundle of adapter `adapter` of a PeftModel (its weights must be whole on this process: under
    ZeRO-3 call it inside the trainer's `gathered()`). `weights` by parameter name replace the module's
    tensors (the learner passes its float32 master, so a bf16 module does not round the update away)."""
    from coplay.models.lora import save_adapter

    tmp = Path(tempfile.mkdtemp(prefix=f"coplay-export-{adapter}-"))
    try:
        save_adapter(policy, adapter, tmp, weights)
        config = json.loads((tmp / ADAPTER_CONFIG).read_text())
        files = {ADAPTER_CONFIG: canonical_adapter_config(config, base_model),
                 ADAPTER_WEIGHTS: (tmp / ADAPTER_WEIGHTS).read_bytes()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return AdapterBundle.of(files)
