"""Files a run writes and trusts: atomic writes (a crash mid-write leaves the previous file, or none, never
half a file) and the one sha256 helper every checksum in coplay goes through.

Used for shards, banks, adapters, checkpoints, manifests and metrics lines. Every file gets the mode an
ordinary `open()` would give it (0644 under the usual umask 022), whether written atomically or appended:
a run folder holds no secret (an endpoint's key is read from the environment variable named by
`api_key_env`, never written), and a folder whose `metrics.jsonl` others may read but whose `config.yaml`
and `report.html` they may not would protect nothing. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20
_FILE_MODE = 0o666 & ~0o022  # what `open()` creates under the usual umask; the process's umask still applies


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (`/proc/self/status`), else by
    setting and restoring it (a moment in which another thread creating files would get 0o022)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass  # not Linux, or an older kernel without the field: the portable way below
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
    """Write to a temp file in the same folder, fsync, then rename over `path`. The temp file is
    created 0600 (`mkstemp`); it gets the ordinary mode (`_FILE_MODE` under the umask) before it replaces
    `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _FILE_MODE & ~_umask())
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
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, _FILE_MODE)
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short append to {path}: {written} of {len(data)} bytes")
    finally:
        os.close(fd)
