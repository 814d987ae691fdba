"""What an engine checks before it serves an adapter bundle (`coplay.artifacts.bundle`), and the registry of
adapter versions an engine serves (in-flight counts, retirement).

Engines refuse a bundle whose checksum differs from the announced one, whose safetensors do not parse
exactly (truncation, trailing bytes, bad offsets), whose config is not a LoRA config, or whose rank exceeds
the engine's `max_lora_rank`. Imports only the standard library: backends load the verified bytes with their
own libraries.
"""

from __future__ import annotations

import json
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coplay.artifacts.bundle import ADAPTER_CONFIG, ADAPTER_WEIGHTS, BUNDLE_FILES, bundle_sha256
from coplay.engines.base import AdapterNotLoaded, AdapterRejected, engine_name

_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class VerifiedAdapter:
    """A bundle that passed `verify_bundle`: its parsed config and tensor names."""

    files: dict[str, bytes]
    sha256: str
    config: dict[str, Any]
    rank: int
    tensor_shapes: dict[str, tuple[int, ...]]

    @property
    def tensor_names(self) -> tuple[str, ...]:
        return tuple(sorted(self.tensor_shapes))


def _parse_safetensors(data: bytes, rank: int) -> dict[str, tuple[int, ...]]:
    """Check the safetensors layout byte for byte; returns {tensor name: shape}. Raises ValueError."""
    if len(data) < 8:
        raise ValueError(f"{ADAPTER_WEIGHTS}: {len(data)} bytes, shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > _MAX_HEADER or 8 + header_len > len(data):
        raise ValueError(f"{ADAPTER_WEIGHTS}: header of {header_len} bytes does not fit in {len(data)} bytes "
                         "(truncated?)")
    try:
        header = json.loads(data[8:8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{ADAPTER_WEIGHTS}: header is not JSON ({err})") from err
    if not isinstance(header, dict):
        raise ValueError(f"{ADAPTER_WEIGHTS}: header is not a JSON object")
    header.pop("__metadata__", None)
    payload = len(data) - 8 - header_len
    spans = []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (TypeError, KeyError, ValueError) as err:
            raise ValueError(f"{ADAPTER_WEIGHTS}: tensor {name!r} has a malformed entry {info!r}") from err
        if dtype not in _DTYPE_BYTES or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"{ADAPTER_WEIGHTS}: tensor {name!r} has dtype {dtype!r} shape {shape!r}")
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * _DTYPE_BYTES[dtype]:
            raise ValueError(f"{ADAPTER_WEIGHTS}: tensor {name!r} spans {end - begin} bytes, "
                             f"its shape {shape} of {dtype} needs {numel * _DTYPE_BYTES[dtype]}")
        if "lora_A" in name and (len(shape) != 2 or shape[0] != rank):
            raise ValueError(f"{ADAPTER_WEIGHTS}: {name!r} has shape {shape}, expected [r={rank}, in]")
        if "lora_B" in name and (len(shape) != 2 or shape[1] != rank):
            raise ValueError(f"{ADAPTER_WEIGHTS}: {name!r} has shape {shape}, expected [out, r={rank}]")
        if "lora_A" not in name and "lora_B" not in name:
            raise ValueError(f"{ADAPTER_WEIGHTS}: tensor {name!r} is not a LoRA A or B matrix")
        spans.append((begin, end, name))
    if not spans:
        raise ValueError(f"{ADAPTER_WEIGHTS}: holds no tensors")
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(f"{ADAPTER_WEIGHTS}: tensor {name!r} starts at {begin}, expected {position}")
        position = end
    if position != payload:
        raise ValueError(f"{ADAPTER_WEIGHTS}: tensors cover {position} bytes but the file holds {payload} "
                         f"after the header ({'truncated' if position > payload else 'trailing bytes'})")
    return {name: tuple(info["shape"]) for name, info in header.items()}


def verify_bundle(files: dict[str, bytes], sha256: str, max_rank: int, label: str) -> VerifiedAdapter:
    """Check checksum, config and weights of a bundle; raise AdapterRejected naming `label` and the fault."""
    if not isinstance(files, dict) or set(files) != set(BUNDLE_FILES):
        got = sorted(files) if isinstance(files, dict) else type(files).__name__
        raise AdapterRejected(f"adapter {label}: bundle holds {got}, expected exactly {list(BUNDLE_FILES)}")
    if not all(isinstance(v, bytes | bytearray | memoryview) for v in files.values()):
        raise AdapterRejected(f"adapter {label}: bundle values must be bytes")
    files = {k: bytes(v) for k, v in files.items()}
    actual = bundle_sha256(files)
    if actual != sha256:
        raise AdapterRejected(f"adapter {label}: checksum mismatch: announced {sha256}, "
                              f"bytes hash to {actual}")
    try:
        config = json.loads(files[ADAPTER_CONFIG])
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise AdapterRejected(f"adapter {label}: {ADAPTER_CONFIG} is not JSON ({err})") from err
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise AdapterRejected(f"adapter {label}: {ADAPTER_CONFIG} is not a LoRA config "
                              f"(peft_type must be 'LORA')")
    rank = config.get("r")
    if not isinstance(rank, int) or not 1 <= rank <= max_rank:
        raise AdapterRejected(f"adapter {label}: rank r={rank!r}; this engine serves ranks 1..{max_rank} "
                              "(engine.max_lora_rank)")
    if not config.get("target_modules"):
        raise AdapterRejected(f"adapter {label}: {ADAPTER_CONFIG} names no target_modules")
    try:
        shapes = _parse_safetensors(files[ADAPTER_WEIGHTS], rank)
    except ValueError as err:
        raise AdapterRejected(f"adapter {label}: {err}") from err
    return VerifiedAdapter(files=files, sha256=actual, config=config, rank=rank, tensor_shapes=shapes)


def _read_header(path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > _MAX_HEADER:
            raise ValueError(f"{path}: safetensors header of {length} bytes")
        header = json.loads(handle.read(length))
    header.pop("__metadata__", None)
    return header


def base_linear_shapes(model: str | Path) -> dict[str, tuple[int, int]]:
    """{module path: (out, in)} of every 2-D weight of a checkpoint (reads safetensors headers only).

    `model` is a local folder or a hub id (then its safetensors from the local Hugging Face cache, which the
    engine filled when it loaded the model).
    """
    folder = Path(model)
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(str(model), allow_patterns=["*.safetensors"]))
    shapes: dict[str, tuple[int, int]] = {}
    for path in sorted(folder.glob("*.safetensors")):
        for name, info in _read_header(path).items():
            if name.endswith(".weight") and len(info.get("shape", ())) == 2:
                out_dim, in_dim = info["shape"]
                shapes[name[: -len(".weight")]] = (out_dim, in_dim)
    if not shapes:
        raise FileNotFoundError(f"model {model}: no safetensors weights found to check adapters against")
    return shapes


def check_fits_base(adapter: VerifiedAdapter, shapes: dict[str, tuple[int, int]], label: str) -> None:
    """Every LoRA tensor must target a linear layer of the base model with matching widths.

    vLLM copies LoRA weights into fixed-size slots and would zero-pad a too-narrow matrix silently.
    """
    for name, shape in sorted(adapter.tensor_shapes.items()):
        part = "lora_A" if ".lora_A." in name else "lora_B"
        module = name.split(f".{part}.")[0].removeprefix("base_model.model.")
        if module not in shapes:
            raise AdapterRejected(f"adapter {label}: tensor {name!r} targets {module!r}, "
                                  f"which the base model lacks")
        out_dim, in_dim = shapes[module]
        expected = (adapter.rank, in_dim) if part == "lora_A" else (out_dim, adapter.rank)
        if shape != expected:
            raise AdapterRejected(f"adapter {label}: tensor {name!r} has shape {list(shape)}, the base "
                                  f"model's {module} needs {list(expected)}")


@dataclass
class AdapterEntry:
    """One adapter version an engine holds; `handle` is the backend's own reference to its weights."""

    name: str
    sha256: str
    handle: Any = None
    in_flight: int = 0
    retired: bool = False
    ready: bool = False


@dataclass
class AdapterRegistry:
    """Which adapter versions serve requests, how many requests use each, and which to drop (thread-safe).

    A name keeps its checksum for the engine's life (also after retirement): re-loading it with other bytes
    is refused, so `<adapter>@v<n>` never changes meaning.
    """

    entries: dict[str, AdapterEntry] = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def begin_load(self, name: str, version: int, sha256: str) -> tuple[str, bool]:
        """Claim `<name>@v<version>` for loading. Returns (engine name, already loaded with these bytes)."""
        label = engine_name(name, version)
        with self.lock:
            known = self.checksums.get(label)
            if known is not None and known != sha256:
                raise AdapterRejected(f"adapter {label}: already known with checksum {known}; a version's "
                                      f"bytes never change (got {sha256}); publish a new version instead")
            entry = self.entries.get(label)
            if entry is not None and not entry.retired:
                if not entry.ready:
                    raise AdapterRejected(f"adapter {label}: a load of this version is already in progress")
                return label, True
            if entry is not None:  # retired but still draining: the same bytes may serve again
                entry.retired = False
                return label, True
            self.entries[label] = AdapterEntry(name=label, sha256=sha256)
            return label, False

    def finish_load(self, label: str, handle: Any) -> None:
        with self.lock:
            entry = self.entries[label]
            entry.handle, entry.ready = handle, True
            self.checksums[label] = entry.sha256

    def abort_load(self, label: str) -> None:
        with self.lock:
            entry = self.entries.get(label)
            if entry is not None and not entry.ready:
                del self.entries[label]

    def acquire(self, label: str | None) -> AdapterEntry | None:
        """Count a request against `label` (None: the base model). Raises AdapterNotLoaded."""
        if label is None:
            return None
        with self.lock:
            entry = self.entries.get(label)
            if entry is None or entry.retired or not entry.ready:
                state = "retired" if entry is not None and entry.retired else "not loaded"
                raise AdapterNotLoaded(f"adapter {label} is {state}; loaded: {self._active()}")
            entry.in_flight += 1
            return entry

    def release(self, entry: AdapterEntry | None) -> AdapterEntry | None:
        """A request finished; returns the entry when it is retired and now unused (the caller drops it)."""
        if entry is None:
            return None
        with self.lock:
            entry.in_flight -= 1
            return self._pop_if_unused(entry)

    def retire(self, label: str) -> AdapterEntry | None:
        """Mark `label` retired; returns the entry when no request uses it (the caller drops it now)."""
        with self.lock:
            entry = self.entries.get(label)
            if entry is None or not entry.ready:
                raise AdapterNotLoaded(f"adapter {label} is not loaded; loaded: {self._active()}")
            entry.retired = True
            return self._pop_if_unused(entry)

    def _pop_if_unused(self, entry: AdapterEntry) -> AdapterEntry | None:
        if entry.retired and entry.in_flight == 0 and self.entries.get(entry.name) is entry:
            del self.entries[entry.name]
            return entry
        return None

    def in_flight(self, label: str) -> int:
        with self.lock:
            entry = self.entries.get(label)
            return entry.in_flight if entry is not None else 0

    def active(self) -> list[str]:
        with self.lock:
            return self._active()

    def _active(self) -> list[str]:
        return sorted(label for label, e in self.entries.items() if e.ready and not e.retired)
