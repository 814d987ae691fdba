"""The model cache: each catalogue model, built once from its GGUF file into an ordinary Hugging Face folder
(safetensors + tokenizer + chat template) that transformers, peft and vLLM all load, with a manifest.

    <cache>/<name>-<dtype>/config.json, model.safetensors, tokenizer.json, ..., coplay-model.json

The manifest (`coplay-model.json`, written last and atomically, so it never names a file that is not
whole) records the source (wheel, version, file, sha256, size), the dtype, the library versions that built
it and each file's size and sha256. A start checks the manifest and the file sizes (milliseconds); the
source's sha256 is recomputed only when its size or mtime changed, the files' checksums only on
`verify=True` (`coplay model prepare --verify`). An entry that fails the check is rebuilt, with one log line
naming the file and what was wrong; a failed rebuild raises `CatalogueError`. Builds take a file lock, so
processes that start together (rollout workers, the learner) build once and the rest wait and reuse it.

Why GGUF -> safetensors instead of loading the GGUF each time: dequantizing costs 2-20 s per process and
vLLM's CPU build does not load this GGUF; the saved folder loads in about a second everywhere.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from coplay.files import sha256_file, write_json_atomic
from coplay.models.catalogue import CatalogueEntry, CatalogueError, installed_version, source_file

log = logging.getLogger(__name__)

MANIFEST_NAME = "coplay-model.json"
MANIFEST_FORMAT = "coplay-model/1"
BUILD_FORMAT = 1  # bump when the build recipe changes, so older entries are rebuilt
BUILD_DTYPES = ("float32", "bfloat16")
_LIBRARIES = ("transformers", "gguf", "torch")


def default_models_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coplay" / "models"


def entry_dir(entry: CatalogueEntry, dtype: str, cache_dir: str | Path | None = None) -> Path:
    """Where `entry` built in `dtype` lives: `<cache>/<name>-<dtype>`."""
    if dtype not in BUILD_DTYPES:
        raise CatalogueError(f"model {entry.name!r}: dtype {dtype!r} cannot be built; expected one of "
                             f"{list(BUILD_DTYPES)}")
    root = Path(cache_dir) if cache_dir else default_models_dir()
    return root / f"{entry.name}-{dtype}"


def read_manifest(folder: Path) -> dict[str, Any]:
    """The entry's manifest; `CatalogueError` names the file when it is missing, unreadable or not ours."""
    path = folder / MANIFEST_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogueError(f"{path} is missing or unreadable ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise CatalogueError(f"{path}: not a {MANIFEST_FORMAT} manifest")
    return data


def entry_problem(entry: CatalogueEntry, dtype: str, folder: Path, verify: bool = False) -> str | None:
    """Why the cache entry at `folder` cannot be used as it is (one line naming the file), or None."""
    try:
        manifest = read_manifest(folder)
        expected = {"name": entry.name, "dtype": dtype, "build_format": BUILD_FORMAT}
        for key, value in expected.items():
            if manifest.get(key) != value:
                return f"{folder / MANIFEST_NAME}: {key} {manifest.get(key)!r}, expected {value!r}"
        problem = _source_problem(entry, manifest["source"], folder)
        if problem:
            return problem
        for name, meta in manifest["files"].items():
            path = folder / name
            if not path.is_file():
                return f"{path} is missing"
            if path.stat().st_size != meta["size"]:
                return f"{path}: {path.stat().st_size} bytes, manifest says {meta['size']} (truncated?)"
            if verify and sha256_file(path) != meta["sha256"]:
                return f"{path}: sha256 does not match its manifest (corrupt)"
    except CatalogueError as exc:
        return str(exc)
    except (KeyError, TypeError, AttributeError) as exc:
        return f"{folder / MANIFEST_NAME}: malformed ({type(exc).__name__}: {exc})"
    return None


def _source_problem(entry: CatalogueEntry, source: dict[str, Any], folder: Path) -> str | None:
    """The installed GGUF is the one the entry was built from (checksum only when size or mtime moved). A
    built entry stays usable where the wheel is not installed (nothing to compare it with)."""
    try:
        path = source_file(entry)
    except CatalogueError:
        return None
    stat = path.stat()
    if stat.st_size != source["size"]:
        return f"{path}: {stat.st_size} bytes, {folder.name} was built from {source['size']} (wheel changed)"
    if stat.st_mtime_ns != source["mtime_ns"] and sha256_file(path) != source["sha256"]:
        return f"{path}: sha256 differs from the one {folder.name} was built from (wheel changed)"
    return None


@contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def prepare_entry(entry: CatalogueEntry, dtype: str, cache_dir: str | Path | None = None,
                  force: bool = False, verify: bool = False) -> Path:
    """The entry's folder, built (or rebuilt, when the check finds a problem or `force`) under a lock."""
    folder = entry_dir(entry, dtype, cache_dir)
    if not force and entry_problem(entry, dtype, folder, verify) is None:
        return folder
    with _build_lock(folder):
        problem = "rebuild requested" if force else entry_problem(entry, dtype, folder, verify)
        if problem is None:  # another process built it while this one waited for the lock
            return folder
        if folder.exists() or force:
            log.warning("model cache: rebuilding %s: %s", folder, problem)
        _build_into(entry, dtype, folder)
    return folder


def _build_into(entry: CatalogueEntry, dtype: str, folder: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        source = source_file(entry)
        stat = source.stat()
        try:
            convert_gguf(source, dtype, tmp)
        except (ValueError, OSError, KeyError, RuntimeError) as exc:  # unreadable/unsupported GGUF
            first = str(exc).splitlines()[0] if str(exc) else ""
            raise CatalogueError(f"building {folder.name} from {source} failed: {type(exc).__name__}: "
                                 f"{first}") from exc
        manifest = {
            "format": MANIFEST_FORMAT, "name": entry.name, "dtype": dtype, "build_format": BUILD_FORMAT,
            "source": {"distribution": entry.distribution, "version": installed_version(entry),
                       "file": source.name, "sha256": sha256_file(source), "size": stat.st_size,
                       "mtime_ns": stat.st_mtime_ns},
            "libraries": {lib: _version(lib) for lib in _LIBRARIES},
            "files": {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
                      for p in sorted(tmp.iterdir()) if p.is_file()},
        }
        write_json_atomic(tmp / MANIFEST_NAME, manifest)
        if folder.exists():
            shutil.rmtree(folder)
        os.rename(tmp, folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def convert_gguf(source: Path, dtype: str, out: Path) -> None:
    """Dequantize the GGUF file with transformers (through the `gguf` package) and save an ordinary folder.

    transformers marks a model read from GGUF as quantized and refuses to save it; the weights it holds
    are already dequantized, so dropping the quantizer and its config saves plain tensors."""
    from coplay.models import default_device

    default_device()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if _version("gguf") is None:
        raise CatalogueError(f"reading {source.name} needs the `gguf` package: pip install gguf")
    # a local GGUF file of a catalogue entry: weights and tokenizer only, never code shipped with a model
    tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name,
                                                 dtype=getattr(torch, dtype), trust_remote_code=False)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def catalogue_rows(cache_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """One row per catalogue model and build dtype found in the cache (or `-` when none is built): what
    `coplay model list` prints."""
    from coplay.models.catalogue import CATALOGUE

    rows = []
    for entry in CATALOGUE.values():
        wheel = installed_version(entry)
        built = [d for d in BUILD_DTYPES if (entry_dir(entry, d, cache_dir) / MANIFEST_NAME).is_file()]
        for dtype in built or [None]:
            folder = entry_dir(entry, dtype, cache_dir) if dtype else None
            problem = entry_problem(entry, dtype, folder) if folder else None
            state = "not built" if folder is None else "ready" if problem is None else f"stale: {problem}"
            rows.append({
                "name": entry.name, "dtype": dtype or "-",
                "wheel": f"{entry.distribution}=={wheel}" if wheel else f"missing ({entry.install_command})",
                "state": state,
                "folder": str(folder) if folder else "-", "summary": entry.summary,
            })
    return rows
