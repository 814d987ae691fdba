"""Atomic file writes: a crash mid-write leaves the previous file (or none), never half a file.

Used for shards, banks, checkpoints, manifests and metrics lines. Standard library only.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write to a temp file in the same folder, fsync, then rename over `path`."""
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


def write_json_atomic(path: Path, obj: Any) -> Path:
    """JSON (sorted keys, UTF-8) written atomically."""
    return write_bytes_atomic(path, json.dumps(obj, sort_keys=True, indent=1).encode())


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
