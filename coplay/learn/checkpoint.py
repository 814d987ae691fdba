"""Exact learner checkpoints: written atomically, verified on load, never pickled.

`checkpoints/step-<k>/` holds
- `adapters.safetensors` (rank 0): every adapter's full weights, keys `<adapter>/<PEFT name>`;
- `optimizer-rank<r>.safetensors` (each rank): that rank's optimizer state per adapter, keys
  `<adapter>/<key>` (torch: AdamW moments and step per parameter; DeepSpeed: the rank's fp32 master
  partition and AdamW state per flat group — so resuming needs the same backend, ZeRO stage and world size);
- `rng-rank<r>.safetensors` + `rng-rank<r>.json`: torch (CPU and CUDA), Python and NumPy RNG states;
- `state.json` (written last): format, learner step, adapter versions, optimizer updates per adapter
  (the learning-rate schedule's clock: the schedule is constant, `LearnerConfig` has no warm-up), bank
  version, data cursor, backend tag, adapter specs, and the sha256 of every other file.

All ranks write into `.step-<k>.tmp-*` (a filesystem shared by the ranks), then rank 0 renames it to
`step-<k>`: a crash mid-write leaves the previous checkpoint usable. Loading refuses, naming the file, a
checkpoint whose files are missing or fail their sha256, whose backend tag or adapter set differs, or whose
tensors have other shapes. Only safetensors and JSON are read: nothing is unpickled. Imports torch, numpy and
safetensors; never ray.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from coplay.files import sha256_file, write_json_atomic
from coplay.learn.distributed import barrier, broadcast_object

FORMAT = "coplay-learner-checkpoint/1"
STATE_FILE = "state.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from; the message names the file and the problem."""


@dataclass
class ResumeState:
    """What a checkpoint gives back besides the learner's own state."""

    learner_step: int
    bank_version: Any = None
    data_cursor: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def _broadcast_path(path: Path | None) -> Path:
    """Rank 0's `path` on every rank."""
    return Path(broadcast_object(str(path) if path is not None else "", src=0))


def _rng_state() -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    tensors = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch_cuda_{i}"] = state
    version, internal, gauss = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    plain = {"python": [version, list(internal), gauss],
             "numpy": [np_name, np_keys.tolist(), int(np_pos), int(np_has_gauss), float(np_gauss)]}
    return tensors, plain


def _set_rng_state(tensors: dict[str, torch.Tensor], plain: dict[str, Any]) -> None:
    torch.set_rng_state(tensors["torch_cpu"])
    if torch.cuda.is_available():
        cuda = [tensors[k] for k in sorted(k for k in tensors if k.startswith("torch_cuda_"))]
        if cuda:
            torch.cuda.set_rng_state_all(cuda)
    version, internal, gauss = plain["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = plain["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))


def save_checkpoint(learner: Any, ckpt_dir: str | Path, bank_version: Any = None, data_cursor: Any = None,
                    extra: dict[str, Any] | None = None) -> Path:
    """Write `ckpt_dir` atomically (call on every rank; every rank gets the path back)."""
    from safetensors.torch import save_file

    ckpt_dir = Path(ckpt_dir)
    rank = learner.rank
    tmp: Path | None = None
    if rank == 0:
        ckpt_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_dir.parent / f".{ckpt_dir.name}.tmp-{learner.learner_step}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    tmp = _broadcast_path(tmp)
    weights: dict[str, torch.Tensor] = {}
    for adapter in learner.adapter_names:  # collective under ZeRO-3: every rank gathers
        for name, tensor in learner.adapter_weights(adapter).items():
            weights[f"{adapter}/{name}"] = tensor.contiguous()
    optim = {f"{a}/{k}": v.contiguous()
             for a in learner.adapter_names for k, v in learner.optimizer_state(a).items()}
    save_file(optim, str(tmp / f"optimizer-rank{rank}.safetensors"))
    rng_tensors, rng_plain = _rng_state()
    save_file({k: v.contiguous() for k, v in rng_tensors.items()}, str(tmp / f"rng-rank{rank}.safetensors"))
    write_json_atomic(tmp / f"rng-rank{rank}.json", rng_plain)
    if rank == 0:
        save_file(weights, str(tmp / "adapters.safetensors"))
    barrier()
    if rank == 0:
        files = sorted(p.name for p in tmp.iterdir() if p.is_file() and not p.name.startswith("."))
        state = {
            "format": FORMAT,
            "learner_step": learner.learner_step,
            "versions": learner.versions,
            "updates": learner.updates,
            "bank_version": bank_version,
            "data_cursor": data_cursor,
            "extra": extra or {},
            "backend": learner.backend_tag,
            "world_size": learner.world_size,
            "adapters": {a: spec.model_dump(mode="json") for a, spec in learner.adapter_specs.items()},
            "sha256": {name: sha256_file(tmp / name) for name in files},
        }
        write_json_atomic(tmp / STATE_FILE, state)
        if ckpt_dir.exists():
            old = ckpt_dir.parent / f".{ckpt_dir.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            ckpt_dir.rename(old)
            tmp.rename(ckpt_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(ckpt_dir)
    barrier()
    return ckpt_dir


def latest_checkpoint(root: str | Path) -> Path | None:
    """The `step-<k>` folder with the largest k that has a `state.json` (None when there is none)."""
    best: tuple[int, Path] | None = None
    for path in Path(root).glob("step-*"):
        suffix = path.name.removeprefix("step-")
        if suffix.isdigit() and (path / STATE_FILE).is_file() and (best is None or int(suffix) > best[0]):
            best = (int(suffix), path)
    return best[1] if best else None


def _read_state(ckpt_dir: Path) -> dict[str, Any]:
    path = ckpt_dir / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {ckpt_dir}: {path} is missing "
                              f"(incomplete or not a checkpoint)") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"checkpoint file {path} is not valid JSON: {exc}") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint file {path}: format "
                              f"{state.get('format') if isinstance(state, dict) else None!r}, "
                              f"expected {FORMAT!r}")
    for name, digest in state["sha256"].items():
        file = ckpt_dir / name
        if not file.is_file():
            raise CheckpointError(f"checkpoint file {file} is missing")
        if sha256_file(file) != digest:
            raise CheckpointError(f"checkpoint file {file} is corrupt (sha256 differs from {path})")
    return state


def _check_compatible(learner: Any, state: dict[str, Any], path: Path) -> None:
    if state["backend"] != learner.backend_tag:
        raise CheckpointError(f"checkpoint file {path}: written by backend {state['backend']!r}, this "
                              f"learner is {learner.backend_tag!r}; resume with the same backend, ZeRO stage "
                              f"and world size")
    specs = {a: s.model_dump(mode="json") for a, s in learner.adapter_specs.items()}
    if state["adapters"] != specs:
        raise CheckpointError(f"checkpoint file {path}: adapters {sorted(state['adapters'])} with specs "
                              f"{state['adapters']} differ from this learner's {specs}")


def load_checkpoint(learner: Any, ckpt_dir: str | Path) -> ResumeState:
    """Restore weights, optimizer states, RNG, counters and versions exactly (call on every rank)."""
    from safetensors.torch import load_file

    ckpt_dir = Path(ckpt_dir)
    state = _read_state(ckpt_dir)
    _check_compatible(learner, state, ckpt_dir / STATE_FILE)
    weights_file = ckpt_dir / "adapters.safetensors"
    optim_file = ckpt_dir / f"optimizer-rank{learner.rank}.safetensors"
    weights, optim = load_file(str(weights_file)), load_file(str(optim_file))
    for adapter in learner.adapter_names:
        prefix = f"{adapter}/"
        adapter_weights = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
        current = learner.adapter_weights(adapter)
        for name, tensor in current.items():
            if name not in adapter_weights or adapter_weights[name].shape != tensor.shape:
                got = adapter_weights.get(name)
                raise CheckpointError(f"checkpoint file {weights_file}: tensor {prefix}{name} has shape "
                                      f"{None if got is None else tuple(got.shape)}, "
                                      f"expected {tuple(tensor.shape)}")
        adapter_optim = {k[len(prefix):]: v for k, v in optim.items() if k.startswith(prefix)}
        try:
            learner.load_adapter_state(adapter, adapter_weights, adapter_optim)
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"checkpoint file {optim_file}: adapter {adapter!r}: {exc}") from None
    rng_tensors = load_file(str(ckpt_dir / f"rng-rank{learner.rank}.safetensors"))
    _set_rng_state(rng_tensors, json.loads((ckpt_dir / f"rng-rank{learner.rank}.json").read_text()))
    learner.learner_step = int(state["learner_step"])
    learner.versions = {a: int(state["versions"][a]) for a in learner.adapter_names}
    learner.updates = {a: int(state["updates"][a]) for a in learner.adapter_names}
    return ResumeState(learner_step=learner.learner_step, bank_version=state["bank_version"],
                       data_cursor=state["data_cursor"], extra=state.get("extra", {}))
