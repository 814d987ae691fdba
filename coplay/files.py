"""Files a run writes and trusts: atomic writes (a crash mid-write leaves the previous file, or none, never
half a file) and the one sha256 helper every checksum in coplay goes through.

Used for shards, banks, adapters, checkpoints, manifests and metrics lines. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes in memory."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (model weights do not fit comfortably in memory twice)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write to a temp file in the same folder, fsync, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def json_bytes(obj: Any) -> bytes:
    """The JSON bytes coplay writes for records and manifests: sorted keys, indented, UTF-8."""
    return json.dumps(obj, sort_keys=True, indent=1).encode()


def write_json_atomic(path: Path, obj: Any) -> Path:
    """JSON (sorted keys, UTF-8) written atomically."""
    return write_bytes_atomic(path, json_bytes(obj))


def append_line_atomic(path: Path, line: str) -> None:
    """Append one line with a single `write` on an O_APPEND descriptor, so concurrent appenders never
    interleave within a line and a reader never sees a partial line followed by another."""
    data = (line.rstrip("\n") + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short append to {path}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)
