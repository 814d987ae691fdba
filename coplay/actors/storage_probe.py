"""Shared storage, checked at the start of a multi-node run (docs/gpu-clusters.md).

Learner ranks write checkpoints into the run folder, the ArtifactStore writes adapter and bank copies there,
and the driver reads all of it back (resume, the report). On a cluster that works only when every node sees
the same filesystem at the run folder's path; on `ray up` or a bare-metal cluster that is a manual mount
that nothing else checks, and a node without it fails late (a checkpoint the driver cannot find, a resume
that finds nothing) or not at all (a node writing into its own local folder at the same path).

So at start the driver writes a token into `<run>/.storage-probe/driver.json`; every learner rank, rollout
worker and the store (`storage_probe` on each actor, `write_probe` here) reads that token back on its node
and writes `<run>/.storage-probe/<actor>.json` with the token; the driver reads every actor's file back.
An actor that cannot see the folder, sees another folder there (no driver token, or another one), cannot
write, or whose file the driver cannot read, stops the run in one line that names the actor, its node and
what to mount (`SharedStorageError`). Nothing is created on a node: a missing run folder is the finding.

Test hook: an actor whose process has `COPLAY_TESTING_NODE_ROOT=<dir>` in its environment sees the run
folder under `<dir>` (`<dir>/<absolute run path>`), as a node with other disks would; a simulated node is
given it through its raylet's environment (tests/cluster/test_storage_and_adapters.py). Nothing in a run
sets it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

PROBE_DIR = ".storage-probe"
DRIVER_FILE = "driver.json"
TESTING_NODE_ROOT = "COPLAY_TESTING_NODE_ROOT"
MOUNT_HINT = ("mount the same shared filesystem (NFS, EFS, Lustre, a ReadWriteMany volume) at that path on "
              "every node, or set run.out_dir to a path all nodes share (docs/gpu-clusters.md)")


class SharedStorageError(RuntimeError):
    """A node does not share the run folder with the driver; the message (one line) names it."""


@dataclass(frozen=True)
class ProbeReport:
    """What one actor found: who and where it is, the probe file it wrote, or why it could not."""

    who: str
    node_id: str
    node_ip: str
    host: str
    file: str = ""
    error: str = ""

    def where(self) -> str:
        return f"node {self.node_ip} (host {self.host}, node id {self.node_id[:12]})"


def _slug(who: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", who).strip("-") or "actor"


def node_view(run_root: str) -> Path:
    """The run folder as this process's node sees it (the test hook of the module docstring aside: as
    given)."""
    prefix = os.environ.get(TESTING_NODE_ROOT)
    root = Path(run_root)
    return Path(prefix) / root.relative_to(root.anchor) if prefix else root


def _this_node() -> dict[str, str]:
    """Node id, address and host name of this process (outside Ray: the host name only)."""
    if not ray.is_initialized():
        return {"node_id": "", "node_ip": "", "host": socket.gethostname()}
    return {"node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname()}


def write_probe(run_root: str, who: str, token: str) -> ProbeReport:
    """In an actor: check the driver's token in the run folder and write this actor's probe file there.
    Never raises for what it finds; the report carries it."""
    here = {"who": who, **_this_node()}
    root = node_view(run_root)
    if not root.is_dir():
        return ProbeReport(**here, error=f"does not see the run folder {run_root} (no such directory there)")
    try:
        seen = json.loads((root / PROBE_DIR / DRIVER_FILE).read_text()).get("token")
    except FileNotFoundError:
        seen = None
    except (OSError, ValueError, AttributeError) as exc:
        return ProbeReport(**here, error=f"cannot read the driver's probe file in {run_root} ({exc})")
    if seen != token:
        return ProbeReport(**here, error=f"sees another folder at {run_root} (a local directory of that "
                                         f"node: the driver's probe file is not in it)")
    name = f"{_slug(who)}.json"
    try:
        (root / PROBE_DIR / name).write_text(json.dumps({**here, "token": token}))
    except OSError as exc:
        why = exc.strerror or str(exc)
        return ProbeReport(**here, error=f"cannot write into the run folder {run_root} ({why})")
    return ProbeReport(**here, file=name)


def multi_node() -> bool:
    """Whether the Ray cluster has more than one live node (a local run has one: nothing to check)."""
    return sum(1 for node in ray.nodes() if node.get("Alive")) > 1


class StorageCheck:
    """The driver's side: the token file, the probes sent to actors, the files read back."""

    def __init__(self, run_root: Path | None) -> None:
        """`run_root` None: a check that does nothing (a single-node run)."""
        self.root = Path(run_root) if run_root is not None else None
        self.token = secrets.token_hex(16)
        self.checked: list[ProbeReport] = []
        if self.root is not None:
            self.folder.mkdir(exist_ok=True)
            (self.folder / DRIVER_FILE).write_text(json.dumps({"token": self.token}))

    @classmethod
    def for_run(cls, run_root: Path | None) -> StorageCheck:
        """The check of a run: active on a multi-node cluster, a no-op otherwise."""
        return cls(run_root if run_root is not None and multi_node() else None)

    @property
    def folder(self) -> Path:
        return (self.root or Path()) / PROBE_DIR

    def send(self, actors: dict[str, Any]) -> dict[str, Any]:
        """Ask each actor (who -> handle with a `storage_probe` method) to probe; who -> ObjectRef."""
        if self.root is None:
            return {}
        return {who: actor.storage_probe.remote(str(self.root), self.token) for who, actor in actors.items()}

    def check(self, probes: dict[str, Any]) -> list[ProbeReport]:
        """Wait for the probes and read every file back; `SharedStorageError` in one line for the first
        actor that failed (and how many more did)."""
        return self.verdict(ray.get(list(probes.values()))) if probes else []

    def verdict(self, reports: list[ProbeReport]) -> list[ProbeReport]:
        """`check` on reports already in hand."""
        failed = [(report, problem) for report in reports
                  if (problem := report.error or self._read_back(report))]
        if failed:
            (first, problem), rest = failed[0], failed[1:]
            more = (f" (also failed: {', '.join(f'{r.who} on node {r.node_ip}' for r, _ in rest)})"
                    if rest else "")
            raise SharedStorageError(f"shared storage: {first.who} on {first.where()} {problem}{more}; the "
                                     f"driver writes the run folder {self.root} and every node must see it: "
                                     f"{MOUNT_HINT}")
        self.checked += reports
        return reports

    def _read_back(self, report: ProbeReport) -> str:
        path = self.folder / report.file
        try:
            token = json.loads(path.read_text()).get("token")
        except (OSError, ValueError, AttributeError) as exc:
            return f"wrote its probe file, but the driver cannot read it back ({exc})"
        return "" if token == self.token else "wrote a probe file the driver reads with another token"

    def close(self) -> None:
        """Remove the probe folder (the run folder keeps only what the run writes)."""
        if self.root is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
