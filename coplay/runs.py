"""The run folder (docs/run-folder.md): where everything a run produces lands.

runs/<name>-<YYYYmmdd-HHMMSS>/ config.yaml metrics.jsonl shards/ adapters/<a>/v<n>/ banks/<game>/v<n>.json
checkpoints/step-<k>/ tb/ (with logging.tensorboard) eval/ report.html.
Standard library + the config module only.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coplay.files import append_line_atomic, write_bytes_atomic

SUBDIRS = ("shards", "adapters", "banks", "checkpoints", "eval")  # tb/ only when TensorBoard writes


class RunDirError(ValueError):
    """A folder that is not a usable run folder."""


@dataclass(frozen=True)
class RunDir:
    """Paths of one run folder; creating or opening one never deletes anything."""

    root: Path

    @classmethod
    def create(cls, out_dir: str | Path, name: str, config_yaml: str, when: float | None = None) -> RunDir:
        """Make `out_dir/<name>-<timestamp>/` with the layout of docs/run-folder.md and the resolved config;
        a clash with an existing folder (two runs in the same second) gets a numeric suffix instead of
        overwriting."""
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
        base = Path(out_dir) / f"{name}-{stamp}"
        root, n = base, 1
        while True:
            try:
                root.mkdir(parents=True, exist_ok=False)
                break
            except FileExistsError:
                n += 1
                root = base.with_name(f"{base.name}-{n}")
        run = cls(root)
        for sub in SUBDIRS:
            (root / sub).mkdir()
        write_bytes_atomic(run.config_path, config_yaml.encode())
        run.metrics_path.touch()
        return run

    @classmethod
    def open(cls, root: str | Path) -> RunDir:
        """An existing run folder; `RunDirError` names what is missing."""
        root = Path(root)
        if not (root / "config.yaml").is_file():
            raise RunDirError(f"{root} is not a coplay run folder (no config.yaml)")
        for sub in SUBDIRS:
            (root / sub).mkdir(exist_ok=True)
        return cls(root)

    def record_config(self, config_yaml: str) -> Path | None:
        """On resume: when the resolved config differs from `config.yaml` (e.g. `loop.iterations` raised to
        extend the run), the old one is kept as `config.<k>.yaml` (k = 1, 2, ...) and `config.yaml` becomes
        the config the run continues with, so the folder always says what produced its newest iterations.
        Returns the kept copy, or None when nothing changed."""
        if self.config_path.read_text() == config_yaml:
            return None
        k = 1
        while (kept := self.root / f"config.{k}.yaml").exists():
            k += 1
        write_bytes_atomic(kept, self.config_path.read_bytes())
        write_bytes_atomic(self.config_path, config_yaml.encode())
        return kept

    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def shards(self) -> Path:
        return self.root / "shards"

    @property
    def tb(self) -> Path:
        return self.root / "tb"

    @property
    def eval(self) -> Path:
        return self.root / "eval"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    def adapter_dir(self, adapter: str, version: int) -> Path:
        return self.root / "adapters" / adapter / f"v{version}"

    def bank_path(self, bank_key: str, version: int) -> Path:
        """Bank keys may hold a slash (`avalon/good`): it becomes a subfolder."""
        return self.root / "banks" / bank_key / f"v{version}.json"

    def checkpoint_dir(self, step: int) -> Path:
        return self.root / "checkpoints" / f"step-{step}"

    def shard_path(self, iteration: int, worker: int, index: int = 0) -> Path:
        return self.shards / f"it{iteration:05d}-w{worker:03d}-{index:04d}.msgpack"

    def append_metrics(self, record: dict[str, Any]) -> None:
        """One JSON object per line, appended atomically."""
        append_line_atomic(self.metrics_path, json.dumps(record, sort_keys=True, allow_nan=False))

    def torn_metrics_tail(self) -> str:
        """The torn last line of `metrics.jsonl` (a write cut short: not JSON), else ""."""
        if not self.metrics_path.is_file():
            return ""
        text = self.metrics_path.read_text(errors="replace")
        last = text.rstrip("\n").rpartition("\n")[2]
        if not last.strip():
            return ""
        try:
            json.loads(last)
        except json.JSONDecodeError:
            return last
        return ""

    def cut_torn_metrics_tail(self) -> str:
        """Move a torn last line of `metrics.jsonl` to `metrics.jsonl.torn` (kept for inspection), so the
        next append starts a line of its own; returns what was moved ("" when nothing was torn)."""
        torn = self.torn_metrics_tail()
        if torn:
            text = self.metrics_path.read_text(errors="replace")
            keep = text[: text.rstrip("\n").rfind(torn)]
            with open(self.root / "metrics.jsonl.torn", "a") as f:
                f.write(torn + "\n")
            write_bytes_atomic(self.metrics_path, keep.encode())
        return torn

    def read_metrics(self) -> list[dict[str, Any]]:
        """All metric records. A torn final line (a crash mid-append) is left out (`torn_metrics_tail` says
        what it was; `coplay report` and `coplay train --resume` report it); a bad line anywhere else is an
        error naming the file and line, since it means the file was edited or corrupted."""
        lines = [ln for ln in self.metrics_path.read_text().splitlines() if ln.strip()]
        records = []
        for i, line in enumerate(lines):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                if i == len(lines) - 1:
                    break
                raise RunDirError(f"{self.metrics_path}: line {i + 1} is not JSON: {exc}") from None
        return records
