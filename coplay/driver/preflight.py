"""Checks of a run folder made before Ray starts, so a bad folder fails in a second with one line naming the
file, not after the actors are up with a remote traceback.

`verify_artifacts(run)` checks every artifact against its manifest (`coplay.artifacts.manifest`: adapter
files and safetensors headers, bank JSON and its sha256, then parses the bank); `metrics_warnings` reports a
torn last line of `metrics.jsonl`. `resume_point(run, cfg)` reads the checkpoint `--resume` continues from
(its `state.json` parsed and every file it lists checked against its sha256), removes versions published
after it (`drop_versions_after`), runs those checks and decides what the resumed run does:
- no complete checkpoint yet (stopped during the cold start or the first iterations): start the run over in
  the same folder (`restart_in_place` clears what the stopped attempt wrote);
- a checkpoint after the last configured iteration with its last learner step done: nothing to do
  (`RunFinished`; the command exits 0 and appends nothing);
- otherwise continue from the checkpoint, the way `coplay.driver.state.resume_state` documents.
No ray, no torch here: JSON, hashes and safetensors headers only.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from coplay.artifacts import ArtifactError
from coplay.artifacts.manifest import bank_manifest_path, read_adapter_version, read_bank_version
from coplay.config import CoplayConfig
from coplay.files import sha256_file
from coplay.runs import RunDir, RunDirError

STATE_FILE = "state.json"


class RunFinished(Exception):
    """`--resume` of a run that has already done every configured iteration: the message says how to extend
    it. Not an error (exit 0)."""


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a resume continues from (None: start over in the folder) and its loop position."""

    checkpoint: Path | None
    iteration: int = 0
    learner_step: int = 0


def check_safetensors(path: Path) -> None:
    """The safetensors library reads the file's header and checks that its tensors cover the file exactly
    (a truncated or padded copy fails); nothing is loaded."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            f.keys()
    except (SafetensorError, OSError) as exc:
        raise ArtifactError(f"{path}: not a whole safetensors file ({exc})") from None


def _adapter_problem(folder: Path) -> str | None:
    try:
        read_adapter_version(folder)
    except ArtifactError as exc:
        return str(exc)
    for name in sorted(p.name for p in folder.glob("*.safetensors")):
        try:
            check_safetensors(folder / name)
        except ArtifactError as exc:
            return str(exc)
    return None


def _bank_problem(path: Path) -> str | None:
    try:
        data, _ = read_bank_version(path)
        json.loads(data)
    except ArtifactError as exc:
        return str(exc)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"{path}: not JSON ({exc})"
    return None


def _shard_problem(path: Path) -> str | None:
    from coplay.types import ShardError, read_shard

    try:
        read_shard(path)
    except (ShardError, OSError) as exc:
        return f"{path}: unreadable trajectory shard ({exc})"
    return None


def artifact_problems(run: RunDir, shards: bool = False) -> list[str]:
    """One line per bad file of the run folder: every adapter version and bank version against its manifest
    (banks also parsed as JSON), and with `shards` every trajectory shard decoded."""
    found = [_adapter_problem(m.parent) for m in sorted(run.root.glob("adapters/*/v*/manifest.json"))]
    found += [_bank_problem(p) for p in sorted(run.root.glob("banks/**/v*.json"))
              if not p.name.endswith(".manifest.json")]
    if shards:
        found += [_shard_problem(p) for p in sorted(run.shards.glob("*.msgpack"))]
    return [p for p in found if p is not None]


def verify_artifacts(run: RunDir) -> None:
    """`ArtifactError` naming the first bad adapter or bank file of the run folder."""
    problems = artifact_problems(run)
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise ArtifactError(problems[0] + more)


def read_checkpoint_state(ckpt: Path) -> dict:
    """`state.json` of a learner checkpoint, parsed, with every file it lists checked against its sha256."""
    path = ckpt / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"{path}: not a readable checkpoint state ({exc})") from None
    if not isinstance(state, dict) or not isinstance(state.get("sha256"), dict):
        raise ArtifactError(f"{path}: not a checkpoint state (no sha256 table)")
    for name, digest in sorted(state["sha256"].items()):
        file = ckpt / name
        if not file.is_file():
            raise ArtifactError(f"{file}: missing (listed in {path})")
        if sha256_file(file) != digest:
            raise ArtifactError(f"{file}: sha256 differs from {path} (truncated or corrupt)")
        if name.endswith(".safetensors"):
            check_safetensors(file)
    return state


def metrics_warnings(run: RunDir) -> list[str]:
    """A warning per problem of `metrics.jsonl` that a run can continue past (a torn last line)."""
    torn = run.torn_metrics_tail()
    return [f"{run.metrics_path}: the last line is torn ({len(torn)} bytes, a write cut short); it is not "
            f"a record"] if torn else []


def _complete_checkpoints(run: RunDir) -> list[Path]:
    found = [p for p in (run.root / "checkpoints").glob("step-*")
             if p.name.removeprefix("step-").isdigit() and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name.removeprefix("step-")))


def drop_versions_after(run: RunDir, extra: dict) -> list[str]:
    """Delete the adapter and bank versions a stopped attempt published after its last checkpoint (the
    checkpoint's schedule names none of them; the resumed run publishes them again, and versions are never
    overwritten). Like the shards of those iterations, they are played again. Returns what was removed."""
    from coplay.driver.schedule import BankSchedule, VersionLedger

    adapters = VersionLedger.from_json(extra["ledger"]).latest()
    banks = BankSchedule.from_json(extra["banks"]).latest()
    removed = []
    for folder in sorted(run.root.glob("adapters/*/v*")):
        version = folder.name[1:]
        if folder.is_dir() and version.isdigit() and int(version) > adapters.get(folder.parent.name, -1):
            shutil.rmtree(folder)
            removed.append(str(folder.relative_to(run.root)))
    for path in sorted(run.root.glob("banks/**/v*.json")):
        if path.name.endswith(".manifest.json") or not path.stem[1:].isdigit():
            continue
        key = path.parent.relative_to(run.root / "banks").as_posix()
        if int(path.stem[1:]) > banks.get(key, -1):
            path.unlink()
            bank_manifest_path(path).unlink(missing_ok=True)
            removed.append(str(path.relative_to(run.root)))
    return removed


def resume_point(run: RunDir, cfg: CoplayConfig) -> ResumePoint:
    """Where `coplay train --resume` continues (module docstring). The checkpoint is read first; a finished
    run stops there (nothing is changed); otherwise versions published after the checkpoint are removed,
    the folder is verified, and a torn last metrics line is reported and moved aside
    (`RunDir.cut_torn_metrics_tail`) so appends stay whole."""
    checkpoints = _complete_checkpoints(run)
    if not checkpoints:  # started over in place: what the stopped attempt wrote is cleared, not checked
        _cut_torn(run)
        return ResumePoint(None)
    ckpt = checkpoints[-1]
    state = read_checkpoint_state(ckpt)
    extra = state.get("extra") or {}
    if not {"iteration", "ledger", "banks"} <= set(extra) or "learner_step" not in state:
        raise ArtifactError(f"{ckpt / STATE_FILE}: no loop state (iteration, ledger, banks)")
    iteration, step = int(extra["iteration"]), int(state["learner_step"])
    last = cfg.loop.iterations
    if iteration >= last and step >= iteration:
        raise RunFinished(f"{run.root} is finished: iteration {iteration} of loop.iterations={last} and "
                          f"learner step {step} are done; nothing to do (extend it with "
                          f"loop.iterations={iteration + 1} or more)")
    if iteration > last:
        raise RunDirError(f"{run.root}: its checkpoint is after iteration {iteration}, beyond "
                          f"loop.iterations={last}")
    removed = drop_versions_after(run, extra)
    if removed:
        print(f"coplay train: removed {len(removed)} version(s) published after {ckpt.name} (they are made "
              f"again): {', '.join(removed)}", file=sys.stderr)
    verify_artifacts(run)
    _cut_torn(run)
    kept = run.record_config(cfg.to_yaml())  # only once the folder is known good: nothing else changed
    if kept is not None:
        print(f"coplay train: config.yaml now holds the config this resume runs with; the previous one is "
              f"{kept.name}", file=sys.stderr)
    return ResumePoint(ckpt, iteration, step)


def _cut_torn(run: RunDir) -> None:
    for warning in metrics_warnings(run):
        print(f"coplay train: {warning}; moved to metrics.jsonl.torn", file=sys.stderr)
    run.cut_torn_metrics_tail()


def restart_in_place(run: RunDir) -> None:
    """Clear what an attempt stopped before its first checkpoint wrote (adapters, banks, shards, partial
    checkpoints), so the run starts over in the same folder; `config.yaml`, `metrics.jsonl`, `eval/` and
    `tb/` stay (the new cold-start record is appended, and the last record of an iteration is the valid
    one)."""
    for sub in ("adapters", "banks", "shards", "checkpoints"):
        shutil.rmtree(run.root / sub, ignore_errors=True)
        (run.root / sub).mkdir()


class RunStopped(Exception):
    """A run that ended before its last iteration: interrupted (Ctrl-C, SIGTERM) or failed inside a Ray
    actor. The message is one line for the user; `exit_code` is 130 for an interruption, 1 for a failure."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def resume_line(root: Path) -> str:
    """How a stopped run's last line names its folder (a normal stop and a forced one alike)."""
    return f"the run folder is resumable: coplay train --resume {root}"


def run_stopped(run: RunDir, exc: BaseException) -> RunStopped:
    """The one line a stopped run shows. A failure's remote traceback goes to `<run>/error.log`, and the
    line carries the message of the exception raised inside the actor."""
    resume = resume_line(run.root)
    if isinstance(exc, KeyboardInterrupt):
        return RunStopped(f"stopped (Ctrl-C or SIGTERM); Ray and the engines are shut down; {resume}", 130)
    import traceback

    log = run.root / "error.log"
    with open(log, "a") as f:
        f.write("".join(traceback.format_exception(exc)) + "\n")
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    detail = (text[0] if cause is not exc else text[-1]) if text else ""
    return RunStopped(f"{type(cause).__name__}: {detail} (traceback in {log}); {resume}", 1)
