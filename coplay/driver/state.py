"""The loop's state (`LoopState`) and where the loop starts: a fresh run (cold start), or
`coplay train --resume RUN_DIR` (docs/architecture.md). A checkpoint persists one `LoopState`.

Resume continues from the run folder's last checkpoint `checkpoints/step-<k>/` (written after iteration k)
and restores exactly:
- the learner: adapter weights, optimizer states, RNG states, step counter and versions (`load_checkpoint`);
- the schedule: the `VersionLedger` (learner step -> adapter versions) and the `BankSchedule` (iteration j ->
  bank versions built from iterations <= j), from the checkpoint's `extra` (`LoopState.to_json`);
- the artifacts: every adapter version the ledger names, from `adapters/<a>/v<n>/` (checked against the sha256
  of its manifest), and every bank version the bank schedule names, from `banks/<key>/v<n>.json` (checked
  against its manifest), into a fresh ArtifactStore; workers then sync from it as in any iteration;
- the league (`coplay.driver.league`): ratings as of the checkpoint, rewritten to `league.json`;
- the skill-bank actor: its next update builds on the newest bank versions of the schedule, read from the
  store;
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

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from coplay.config import CoplayConfig
from coplay.driver.league import LEAGUE_FILE, League
from coplay.driver.phases import PhaseClock, phase_record, start_busy
from coplay.driver.probe import RunProbe, run_probe
from coplay.driver.progress import phase
from coplay.driver.records import IterationData
from coplay.driver.schedule import BankSchedule, VersionLedger, bank_version_for
from coplay.files import sha256_bytes, write_bytes_atomic
from coplay.runs import RunDir
from coplay.types import Sample, decode_shard, from_dict, to_dict

BANK_SAMPLES_FORMAT = "coplay-bank-samples/1"
LOOP_STATE_FORMAT = "coplay-loop-state/1"


class ResumeError(RuntimeError):
    """A run folder that cannot be resumed; the message names the file and the problem."""


@dataclass
class LoopState:
    """What the loop carries from one iteration to the next: the adapter versions of every learner step, the
    bank versions built from every iteration, and the iteration data still needed (the last one or two)."""

    ledger: VersionLedger
    banks: BankSchedule
    data: dict[int, IterationData] = field(default_factory=dict)
    next_iteration: int = 1
    resumed_from: str | None = None
    league: League | None = None

    def keep(self, data: IterationData) -> None:
        """Hold iteration k's data; iteration k-2's is no longer needed (its bank update and its learner
        step are done)."""
        self.data[data.iteration] = data
        self.data.pop(data.iteration - 2, None)

    def to_json(self, run: RunDir, iteration: int, staleness: int) -> dict[str, Any]:
        """The checkpoint's record of the loop after iteration `iteration` (its data persisted first)."""
        return {"format": LOOP_STATE_FORMAT, "iteration": iteration, "staleness": staleness,
                "ledger": self.ledger.to_json(), "banks": self.banks.to_json(),
                "pending": pending_record(run, self.data[iteration]),
                "league": self.league.to_json() if self.league is not None else None}


def save_checkpoint(system: Any, state: LoopState, iteration: int) -> str:
    """Learner state plus the `LoopState` after iteration `iteration` (what `coplay train --resume` needs),
    atomically under checkpoints/step-<iteration>/."""
    with phase(f"checkpoint after iteration {iteration}"):
        extra = state.to_json(system.run, iteration, system.cfg.loop.staleness)
        return system.learner.save_checkpoint(str(system.run.checkpoint_dir(iteration)),
                                              state.banks.latest(), {"iteration": iteration}, extra)


def bank_samples_path(run: RunDir, iteration: int) -> Path:
    """Outside the `*.msgpack` glob of `shards/` (a subfolder), so shard readers never see it."""
    return run.shards / "bank-samples" / f"it{iteration:05d}.msgpack"


def pending_record(run: RunDir, data: IterationData) -> dict[str, Any]:
    """Persist what resuming after `data.iteration` needs beyond its shards (the bank samples) and return the
    checkpoint's record of it: file names and sha256."""
    payload = msgpack.packb({"format": BANK_SAMPLES_FORMAT, "iteration": data.iteration,
                             "samples": [to_dict(s) for s in data.bank_samples]}, use_bin_type=True)
    path = write_bytes_atomic(bank_samples_path(run, data.iteration), payload)
    return {"iteration": data.iteration, "bank_versions": data.bank_versions,
            "shards": {run.shard_path(data.iteration, i).name: sha256_bytes(shard)
                       for i, shard in enumerate(data.shards)},
            "bank_samples": {"file": path.name, "sha256": sha256_bytes(payload)}}


def _read_checked(path: Path, sha: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ResumeError(f"cannot resume: {path} is unreadable ({exc})") from None
    if sha256_bytes(data) != sha:
        raise ResumeError(f"cannot resume: {path} does not match the sha256 its checkpoint recorded")
    return data


def load_pending(run: RunDir, record: dict[str, Any]) -> IterationData:
    """The iteration data a checkpoint recorded, from the run folder (checked against its sha256)."""
    iteration = int(record["iteration"])
    shards, trajectories = [], []
    for name, sha in sorted(record["shards"].items()):
        data = _read_checked(run.shards / name, sha)
        shards.append(data)
        trajectories += decode_shard(data, str(run.shards / name)).trajectories
    payload = _read_checked(bank_samples_path(run, iteration), record["bank_samples"]["sha256"])
    content = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    if content.get("format") != BANK_SAMPLES_FORMAT:
        raise ResumeError(f"cannot resume: {bank_samples_path(run, iteration)} has format "
                          f"{content.get('format')!r}")
    samples = [from_dict(Sample, s) for s in content["samples"]]
    return IterationData(iteration, trajectories, shards, dict(record["bank_versions"]), samples)


def resumable_checkpoint(run: RunDir) -> Path:
    """The checkpoint `--resume` continues from (checked before any actor starts)."""
    from coplay.learn.checkpoint import latest_checkpoint

    ckpt = latest_checkpoint(run.root / "checkpoints")
    if ckpt is None:
        raise ResumeError(f"cannot resume {run.root}: no complete checkpoint under "
                          f"{run.root / 'checkpoints'}")
    return ckpt


def fresh_state(system: Any, cfg: CoplayConfig, log: Any,
                evaluate: Callable[..., dict] | None = None, probe: RunProbe | None = None,
                clock: PhaseClock | None = None) -> LoopState:
    """Step 0 (cold start) of a new run; with `evaluate` (eval at start) the cold-start adapters are
    evaluated as iteration 0, the SFT-only point of the learning curve; with `probe` (a
    run's probe sets) they are probed too. `clock`: the run's phase clock, whose laps so far (the start-up)
    and the cold start's go in this line's `phases` (`coplay.driver.phases`)."""
    from coplay.driver.cold_start import cold_start

    clock = clock or PhaseClock()
    versions0, banks0, report = cold_start(system, cfg)
    clock.lap("cold_start_teacher")  # the SFT inside it is moved to `cold_start_sft` below
    record: dict[str, Any] = {"cold_start": report, "versions": versions0, "bank_versions": banks0,
                              "learner": system.learner.describe()}
    engines = system.engines_ready()  # what is left of the engines' start after the cold start
    clock.lap("startup_engines")
    league = League(cfg.rollout.selfplay.league, system.run.root / LEAGUE_FILE)
    if evaluate is not None:
        record["eval"] = evaluate(system, 0, versions0, banks0, league)
    if probe is not None:
        record["probe"] = run_probe(system, probe, 0, versions0, banks0)
    clock.lap("evaluation")
    sft_s = report.get("sft_seconds")
    record["phases"] = phase_record(clock.take(), start_busy(engines, sft_s),
                                    [("cold_start_teacher", "cold_start_sft", sft_s or 0.0)])
    log.log(0, record)
    return LoopState(VersionLedger({0: versions0}), BankSchedule.start(banks0), league=league)


def resume_state(system: Any, cfg: CoplayConfig, log: Any, clock: PhaseClock | None = None) -> LoopState:
    """Everything of the module docstring, from the newest checkpoint of `system.run`. `clock`: the run's
    phase clock; its laps (the start-up) and the resume's go in the `resumed_from` line's `phases`."""
    run: RunDir = system.run
    ckpt = resumable_checkpoint(run)
    extra = system.learner.load_checkpoint(str(ckpt)).extra
    if "ledger" not in extra or "pending" not in extra:
        raise ResumeError(f"cannot resume from {ckpt}: its state.json has no loop state "
                          f"(ledger, pending data)")
    if int(extra["staleness"]) != cfg.loop.staleness:
        raise ResumeError(f"cannot resume from {ckpt}: written with loop.staleness={extra['staleness']}, "
                          f"config says {cfg.loop.staleness}")
    ledger, banks = VersionLedger.from_json(extra["ledger"]), BankSchedule.from_json(extra["banks"])
    learner_versions = system.learner.versions()
    if learner_versions != ledger.latest():
        raise ResumeError(f"cannot resume from {ckpt}: learner versions {learner_versions} differ from the "
                          f"ledger's step {ledger.latest_step}: {ledger.latest()}")
    system.restore_artifacts(ledger, banks)
    k = int(extra["iteration"])
    for path in [*run.shards.glob("it*.msgpack"), *(run.shards / "bank-samples").glob("it*.msgpack")]:
        if int(path.name[2:7]) > k:  # iterations after k are played again
            path.unlink()
    data = load_pending(run, extra["pending"])
    if data.bank_versions != banks.built[bank_version_for(k)]:
        raise ResumeError(f"cannot resume from {ckpt}: pending bank versions disagree with the bank schedule")
    clock = clock or PhaseClock()
    clock.lap("resume")
    engines = system.engines_ready()
    clock.lap("startup_engines")
    log.log(k, {"resumed_from": str(ckpt), "learner_step": ledger.latest_step, "versions": ledger.latest(),
                "bank_versions": banks.latest(), "phases": phase_record(clock.take(), start_busy(engines))})
    league = League(cfg.rollout.selfplay.league, run.root / LEAGUE_FILE)
    if extra.get("league"):
        league.load_json(extra["league"], f"{ckpt} league")
        league.save()  # league.json as of the checkpoint: the iterations after it are played again
    return LoopState(ledger, banks, {k: data}, k + 1, str(ckpt), league)
