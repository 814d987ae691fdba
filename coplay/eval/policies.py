"""The one policy vocabulary of `coplay play` and `coplay eval`:

    base                 the configured base model without adapters and without skills
    run:RUN_DIR[@STEP]   a run's `act` and `retrieve` adapters at learner step STEP (default: the newest),
                         with the run's newest skill banks
    expert | random      the games' bots
    openai               the OpenAI-compatible endpoint of `rollout.opponents.endpoint`

`parse_policy` turns a spec into a `Policy`; `known_steps` is what `@STEP` may name (a step the run does not
have is refused, never replaced by the newest). `eval_file_stem` names an evaluation's files by policy, step,
games, opponents and seeds, so evaluations of different games or seeds never overwrite each other. Standard
library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BOTS = ("expert", "random")
POLICY_HELP = "base | run:RUN_DIR[@STEP] | expert | random | openai"


@dataclass(frozen=True)
class Policy:
    """A parsed policy spec."""

    kind: str  # base | run | expert | random | openai
    run_dir: Path | None = None
    step: int | None = None

    @property
    def spec(self) -> str:
        if self.kind != "run":
            return self.kind
        return f"run:{self.run_dir}" + (f"@{self.step}" if self.step is not None else "")


def parse_policy(spec: str) -> Policy:
    """`ValueError` with the vocabulary for anything else (the old `model` names both meanings, so it is
    refused with what to write instead)."""
    if spec in ("base", "openai", *BOTS):
        return Policy(spec)
    if spec.startswith("run:") and len(spec) > 4:
        folder, at, step = spec[4:].rpartition("@")
        if at and step.isdigit() and folder:
            return Policy("run", Path(folder), int(step))
        if at and folder and not step.isdigit():
            raise ValueError(f"policy {spec!r}: the step after @ must be a learner step number")
        return Policy("run", Path(spec[4:]))
    hint = " (`model` is now `base` for the model without adapters, or run:RUN_DIR for a run's)" \
        if spec == "model" else ""
    raise ValueError(f"policy {spec!r}: expected one of {POLICY_HELP}{hint}")


def known_steps(run_root: Path) -> list[int]:
    """Learner steps a run has published adapters for (every adapter's manifests): 0 through the newest."""
    steps = []
    for manifest in run_root.glob("adapters/*/v*/manifest.json"):
        try:
            steps.append(int(json.loads(manifest.read_text())["learner_step"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return list(range(max(steps) + 1)) if steps else []


def check_step(run_root: Path, step: int | None) -> None:
    """Refuse a step the run does not have, naming the ones it has."""
    if step is None:
        return
    steps = known_steps(run_root)
    if step not in steps:
        have = f"steps {steps[0]}-{steps[-1]}" if steps else "no published adapters"
        raise ValueError(f"learner step {step}: {run_root} has {have}")


def eval_file_stem(label: str, games: list[str], opponents: str | None, seeds_start: int, episodes: int,
                   episodes_per_seat: int) -> str:
    """One name per protocol: `<label>_<games>_vs-<opponents>_seeds<start>-n<episodes>x<per seat>` where a
    multi-seat game is among `games`; `opponents` None (single-player games only: nobody else sits at the
    table, and no episodes per seat) gives `<label>_<games>_seeds<start>-n<episodes>`."""
    if opponents is None:
        return f"{label}_{'+'.join(games)}_seeds{seeds_start}-n{episodes}"
    return (f"{label}_{'+'.join(games)}_vs-{opponents}_seeds{seeds_start}"
            f"-n{episodes}x{episodes_per_seat}")


def unused_stem(out_dir: Path, stem: str) -> str:
    """`stem`, or `stem-2`, `stem-3`, ... when files of that name exist: an evaluation never overwrites."""
    candidate, n = stem, 1
    while (out_dir / f"{candidate}.json").exists() or (out_dir / f"{candidate}.md").exists():
        n += 1
        candidate = f"{stem}-{n}"
    return candidate
