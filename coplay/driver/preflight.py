"""Checks of a run folder made before Ray starts, so a bad folder fails in a second with one line naming the
file, not after the actors are up with a remote traceback.

`verify_run_folder(run)` checks every artifact against its manifest (`coplay.artifacts.manifest`: adapter
files, bank JSON and its sha256, then parses the bank) and reports a torn last line of `metrics.jsonl`.
`resume_point(run, cfg)` adds the checkpoint `--resume` continues from (its `state.json` parsed and every
file it lists checked against its sha256) and decides what the resumed run does:
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
from coplay.artifacts.manifest import read_adapter_version, read_bank_version
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


def verify_run_folder(run: RunDir) -> list[str]:
    """Artifacts checked (raises on the first bad one); returns warnings (a torn last metrics line)."""
    verify_artifacts(run)
    torn = run.torn_metrics_tail()
    return [f"{run.metrics_path}: the last line is torn ({len(torn)} bytes, a write cut short); it is not "
            f"a record"] if torn else []


def _complete_checkpoints(run: RunDir) -> list[Path]:
    found = [p for p in (run.root / "checkpoints").glob("step-*")
             if p.name.removeprefix("step-").isdigit() and (p / STATE_FILE).is_file()]
    return sorted(found, key=lambda p: int(p.name.removeprefix("step-")))


def resume_point(run: RunDir, cfg: CoplayConfig) -> ResumePoint:
    """Where `coplay train --resume` continues (module docstring); the folder is verified first. A torn
    last metrics line is reported, then moved aside (`RunDir.cut_torn_metrics_tail`) so appends stay whole."""
    for warning in verify_run_folder(run):
        print(f"coplay train: {warning}; moved to metrics.jsonl.torn", file=sys.stderr)
    checkpoints = _complete_checkpoints(run)
    if not checkpoints:
        run.cut_torn_metrics_tail()
        return ResumePoint(None)
    ckpt = checkpoints[-1]
    state = read_checkpoint_state(ckpt)
    extra = state.get("extra") or {}
    if "iteration" not in extra or "learner_step" not in state:
        raise ArtifactError(f"{ckpt / STATE_FILE}: no loop state (iteration, learner step)")
    iteration, step = int(extra["iteration"]), int(state["learner_step"])
    last = cfg.loop.iterations
    if iteration >= last and (cfg.loop.staleness == 0 or step >= iteration):
        raise RunFinished(f"{run.root} is finished: iteration {iteration} of loop.iterations={last} and "
                          f"learner step {step} are done; nothing to do (extend it with "
                          f"loop.iterations={iteration + 1} or more)")
    if iteration > last:
        raise RunDirError(f"{run.root}: its checkpoint is after iteration {iteration}, beyond "
                          f"loop.iterations={last}")
    run.cut_torn_metrics_tail()
    return ResumePoint(ckpt, iteration, step)


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


def run_stopped(run: RunDir, exc: BaseException) -> RunStopped:
    """The one line a stopped run shows. A failure's remote traceback goes to `<run>/error.log`, and the
    line carries the message of the exception raised inside the actor."""
    resume = f"the run folder is resumable: coplay train --resume {run.root}"
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
