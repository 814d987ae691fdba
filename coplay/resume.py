"""Where the loop starts: a fresh run (cold start), or `coplay train --resume RUN_DIR` (DESIGN.md §6).

Resume continues from the run folder's last checkpoint `checkpoints/step-<k>/` (written after iteration k)
and restores exactly:
- the learner: adapter weights, optimizer states, RNG states, step counter and versions (`load_checkpoint`);
- the schedule: the `VersionLedger` (learner step -> adapter versions) and the bank map (iteration j -> bank
  versions built from iterations <= j), from the checkpoint's `extra`;
- the artifacts: every adapter version the ledger names, from `adapters/<a>/v<n>/` (checked against the sha256
  of its manifest), and every bank version the bank map names, from `banks/<key>/v<n>.json`, into a fresh
  ArtifactStore; workers then sync from it as in any iteration;
- the skill-bank actor: its next update builds on the newest bank versions of the map, read from the store;
- the data of iteration k that is still needed: its shards (the bank update over k runs during iteration
  k+1; with staleness >= 1 learner step k also trains on them), checked against the sha256 the checkpoint
  recorded, and the bank-adapter samples of the bank update over k-1 (`shards/bank-samples/it<k>.msgpack`,
  written with the checkpoint; msgpack, never pickle), which learner step k trains on when s >= 1.
Not restored: the store's acknowledgements and failure counts (workers acknowledge again); metrics lines of
iterations after k stay in `metrics.jsonl` and the rerun appends new ones (the last line of an iteration is
the valid one; a `resumed_from` line marks the point). Shards of iterations after k are deleted, since those
iterations are played again. With s = 0 the continuation reproduces an uninterrupted run's adapters; with
s >= 1 every episode enters training exactly once across the kill.

No ray here: the System's methods do the remote calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from coplay.atomic import write_bytes_atomic
from coplay.config import CoplayConfig
from coplay.runs import RunDir
from coplay.schedule import VersionLedger, bank_version_for
from coplay.types import Sample, Trajectory, decode_shard, from_dict, to_dict

BANK_SAMPLES_FORMAT = "coplay-bank-samples/1"


class ResumeError(RuntimeError):
    """A run folder that cannot be resumed; the message names the file and the problem."""


@dataclass
class LoopState:
    """What the loop carries from one iteration to the next."""

    ledger: VersionLedger
    banks: dict[int, dict[str, int]]  # iteration j -> bank versions built from iterations <= j
    data: dict[int, tuple[Any, ...]] = field(default_factory=dict)  # j -> (trajectories, bank samples, banks, shards)
    next_iteration: int = 1
    resumed_from: str | None = None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bank_samples_path(run: RunDir, iteration: int) -> Path:
    """Outside the `*.msgpack` glob of `shards/` (a subfolder), so shard readers never see it."""
    return run.shards / "bank-samples" / f"it{iteration:05d}.msgpack"


def pending_record(run: RunDir, iteration: int, data: tuple[Any, ...]) -> dict[str, Any]:
    """Persist what resuming after iteration `iteration` needs beyond its shards (the bank samples) and
    return the checkpoint's record of it: file names and sha256."""
    _, bank_samples, bank_versions, shards = data
    payload = msgpack.packb({"format": BANK_SAMPLES_FORMAT, "iteration": iteration,
                             "samples": [to_dict(s) for s in bank_samples]}, use_bin_type=True)
    path = write_bytes_atomic(bank_samples_path(run, iteration), payload)
    return {"iteration": iteration, "bank_versions": bank_versions,
            "shards": {run.shard_path(iteration, i).name: _sha(shard) for i, shard in enumerate(shards)},
            "bank_samples": {"file": path.name, "sha256": _sha(payload)}}


def _read_checked(path: Path, sha: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResumeError(f"cannot resume: {path} is unreadable ({exc})") from None
    if _sha(data) != sha:
        raise ResumeError(f"cannot resume: {path} does not match the sha256 its checkpoint recorded")
    return data


def load_pending(run: RunDir, record: dict[str, Any]) -> tuple[Any, ...]:
    """Iteration data `(trajectories, bank samples, bank versions, shards)` from the run folder."""
    iteration = int(record["iteration"])
    shards, trajectories = [], []
    for name, sha in sorted(record["shards"].items()):
        data = _read_checked(run.shards / name, sha)
        shards.append(data)
        trajectories += decode_shard(data, str(run.shards / name)).trajectories
    payload = _read_checked(bank_samples_path(run, iteration), record["bank_samples"]["sha256"])
    content = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if content.get("format") != BANK_SAMPLES_FORMAT:
        raise ResumeError(f"cannot resume: {bank_samples_path(run, iteration)} has format {content.get('format')!r}")
    samples = [from_dict(Sample, s) for s in content["samples"]]
    return trajectories, samples, dict(record["bank_versions"]), shards


def resumable_checkpoint(run: RunDir) -> Path:
    """The checkpoint `--resume` continues from (checked before any actor starts)."""
    from coplay.learn.checkpoint import latest_checkpoint

    ckpt = latest_checkpoint(run.root / "checkpoints")
    if ckpt is None:
        raise ResumeError(f"cannot resume {run.root}: no complete checkpoint under {run.root / 'checkpoints'}")
    return ckpt


def fresh_state(system: Any, cfg: CoplayConfig, log: Any, evaluate: Callable[..., dict] | None = None) -> LoopState:
    """Step 0 (cold start) of a new run; with `evaluate` (loop.eval_at_start) the cold-start adapters are
    evaluated as iteration 0, the SFT-only point of the learning curve."""
    from coplay.cold_start import cold_start

    versions0, banks0, report = cold_start(system, cfg)
    record: dict[str, Any] = {"cold_start": report, "versions": versions0, "bank_versions": banks0}
    if evaluate is not None:
        record["eval"] = evaluate(system, 0, versions0, banks0)
    log.log(0, record)
    return LoopState(VersionLedger({0: versions0}), {0: banks0})


def resume_state(system: Any, cfg: CoplayConfig, log: Any) -> LoopState:
    """Everything of the module docstring, from the newest checkpoint of `system.run`."""
    run: RunDir = system.run
    ckpt = resumable_checkpoint(run)
    resumed = system.learner.load_checkpoint(str(ckpt))
    extra = resumed.extra
    if "ledger" not in extra or "pending" not in extra:
        raise ResumeError(f"cannot resume from {ckpt}: its state.json has no loop state (ledger, pending data)")
    if int(extra["staleness"]) != cfg.loop.staleness:
        raise ResumeError(f"cannot resume from {ckpt}: written with loop.staleness={extra['staleness']}, "
                          f"config says {cfg.loop.staleness}")
    ledger = VersionLedger({int(j): {a: int(v) for a, v in vs.items()} for j, vs in extra["ledger"].items()})
    banks = {int(j): {key: int(v) for key, v in vs.items()} for j, vs in extra["banks"].items()}
    learner_versions = system.learner.versions()
    if learner_versions != ledger.at(ledger.latest_step):
        raise ResumeError(f"cannot resume from {ckpt}: learner versions {learner_versions} differ from the "
                          f"ledger's step {ledger.latest_step}: {ledger.at(ledger.latest_step)}")
    system.restore_artifacts(ledger, banks)
    k = int(extra["iteration"])
    for path in run.shards.glob("it*.msgpack"):  # iterations after k are played again
        if int(path.name[2:7]) > k:
            path.unlink()
    for path in (run.shards / "bank-samples").glob("it*.msgpack"):
        if int(path.name[2:7]) > k:
            path.unlink()
    data = {k: load_pending(run, extra["pending"])}
    if data[k][2] != banks[bank_version_for(k)]:
        raise ResumeError(f"cannot resume from {ckpt}: pending bank versions disagree with the bank map")
    log.log(k, {"resumed_from": str(ckpt), "learner_step": ledger.latest_step, "versions": ledger.at(ledger.latest_step),
                "bank_versions": banks[max(banks)]})
    return LoopState(ledger, banks, data, k + 1, str(ckpt))


def trained_episodes(trajectories: list[Trajectory]) -> list[str]:
    """Episode ids of the learner's trajectories (recorded per learner step for exactly-once audits)."""
    return sorted({t.episode_id for t in trajectories if t.policy == "model"})
