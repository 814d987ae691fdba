"""Skills and banks (docs/agents.md): the records, their JSON form, and versioned storage in the run folder.

A bank is a versioned set of skills per bank key (`2048`, `avalon/good`, `diplomacy/FRANCE`). Each version
is one JSON file `banks/<key>/v<n>.json`, written atomically, never overwritten: old versions stay readable.
Standard library + `coplay.files` / `coplay.runs` only; never imports ray, torch or the engines.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from coplay.runs import RunDir
from coplay.skills.expressions import Expression, parse_expression
from coplay.skills.tasking import TaskSpec

BANK_SCHEMA_VERSION = 1
_VERSION_FILE = re.compile(r"^v(\d+)\.json$")


class BankError(ValueError):
    """A bank that cannot be read, written or used: the message names the file or key and the problem."""


class UnknownSkillError(KeyError):
    """A skill id that the bank does not hold."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown skill"


@dataclass
class Contract:
    """Effects a skill brings about: `add` (f↑, b=true), `del` (f↓, b=false), `support` = share of the
    instances each literal held in, `n` = instances the contract was learned from."""

    add: list[str] = field(default_factory=list)
    dele: list[str] = field(default_factory=list)
    support: dict[str, float] = field(default_factory=dict)
    n: int = 0

    @property
    def literals(self) -> list[str]:
        return sorted(self.add + self.dele)

    def to_json(self) -> dict[str, Any]:
        return {"add": self.add, "del": self.dele, "support": self.support, "n": self.n}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Contract:
        return cls(list(data.get("add", [])), list(data.get("del", [])), dict(data.get("support", {})),
                   int(data.get("n", 0)))


@dataclass
class SkillStats:
    """Usage: instances labelled with the skill, those that passed its contract, their mean game reward
    and duration (steps), and the iteration of the last use; and how the decision agent's own runs of it
    ended in play (`play_successes`, `play_aborts`: `Step.skill_event`), which the contract pass rate does
    not see (a skill whose segments pass may still abort whenever the policy runs it)."""

    uses: int = 0
    successes: int = 0
    mean_reward: float = 0.0
    mean_duration: float = 0.0
    last_used: int = 0
    play_successes: int = 0
    play_aborts: int = 0

    @property
    def pass_rate(self) -> float:
        return self.successes / self.uses if self.uses else 0.0


@dataclass
class Instance:
    """One segment labelled with a skill (or pending as NEW): the evidence contracts are learned from."""

    effects: list[str]
    duration: int
    reward: float
    tag: str
    episode_id: str
    start: int
    iteration: int
    start_view: dict[str, float | bool] = field(default_factory=dict)
    end_view: dict[str, float | bool] = field(default_factory=dict)


@dataclass
class Skill:
    """A skill (docs/agents.md). `tags` counts the intention tags of its instances (used for intention fit);
    `evidence` keeps its most recent instances (bounded) so later updates can refine, split or merge it."""

    id: str
    name: str
    summary: str
    plan: list[str]
    preconditions: str
    success: str
    abort: str
    contract: Contract
    stats: SkillStats = field(default_factory=SkillStats)
    version: int = 0
    lineage: list[dict[str, Any]] = field(default_factory=list)
    tags: dict[str, int] = field(default_factory=dict)
    evidence: list[Instance] = field(default_factory=list)
    protocol_source: str = "deterministic"  # or "contract@<sample id>"
    tasking: TaskSpec = field(default_factory=TaskSpec)  # what the proposer needs (docs/curriculum.md)

    def expression(self, which: str) -> Expression:
        """`preconditions`, `success` or `abort` parsed (they were validated when stored)."""
        return parse_expression(getattr(self, which))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["contract"] = self.contract.to_json()
        data["tasking"] = self.tasking.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Skill:
        fields = dict(data)
        fields["contract"] = Contract.from_json(data["contract"])
        fields["stats"] = SkillStats(**data.get("stats", {}))
        fields["evidence"] = [Instance(**e) for e in data.get("evidence", [])]
        fields["tasking"] = TaskSpec.from_json(data.get("tasking"))
        skill = cls(**fields)
        for which in ("preconditions", "success", "abort"):
            skill.expression(which)
        return skill


@dataclass
class Bank:
    """One version of the skill set of one bank key. `operations` are those applied to make this version
    (with evidence and verdicts); `pending` holds NEW instances not yet materialized; `features` is the
    feature vocabulary (name -> "bool" | "number") that expressions are validated against."""

    bank_key: str
    version: int = 0
    iteration: int = 0
    skills: dict[str, Skill] = field(default_factory=dict)
    next_id: int = 1
    features: dict[str, str] = field(default_factory=dict)
    pending: list[Instance] = field(default_factory=list)
    operations: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    literal_counts: dict[str, float] = field(default_factory=dict)  # decayed counts over all segments seen
    segments_seen: float = 0.0

    @property
    def game(self) -> str:
        return self.bank_key.split("/", 1)[0]

    def get(self, skill_id: str) -> Skill:
        """The skill with this id; `UnknownSkillError` names the id, the bank and what it holds."""
        try:
            return self.skills[skill_id]
        except KeyError:
            raise UnknownSkillError(
                f"bank {self.bank_key} v{self.version} has no skill {skill_id!r}; "
                f"it holds {sorted(self.skills)}"
            ) from None

    def new_id(self) -> str:
        skill_id = f"s{self.next_id}"
        self.next_id += 1
        return skill_id

    def copy(self) -> Bank:
        """A deep copy: nothing done to it reaches this bank."""
        return copy.deepcopy(self)

    def derive(self) -> Bank:
        """A new bank sharing this one's skill objects (containers copied): for operations that add and
        remove whole skills without changing any (maintenance counterfactuals)."""
        return dataclasses.replace(self, skills=dict(self.skills), features=dict(self.features),
                                   pending=list(self.pending), operations=list(self.operations),
                                   metrics=dict(self.metrics), literal_counts=dict(self.literal_counts))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": BANK_SCHEMA_VERSION, "bank_key": self.bank_key, "version": self.version,
            "iteration": self.iteration, "next_id": self.next_id, "features": self.features,
            "skills": [self.skills[k].to_json() for k in sorted(self.skills, key=_id_order)],
            "pending": [asdict(i) for i in self.pending], "operations": self.operations,
            "metrics": self.metrics,
            "literal_counts": self.literal_counts, "segments_seen": self.segments_seen,
        }

    def to_bytes(self) -> bytes:
        """The bytes of a bank version everywhere (run folder, store, workers): compact, sorted JSON."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "<bytes>") -> Bank:
        """Inverse of `to_bytes`; `BankError` names `source` when the bytes are not a bank."""
        try:
            parsed = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BankError(f"bank {source}: not JSON ({exc})") from None
        if not isinstance(parsed, dict):
            raise BankError(f"bank {source}: expected a JSON object, got {type(parsed).__name__}")
        return cls.from_json(parsed, source)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "<data>") -> Bank:
        if data.get("schema_version") != BANK_SCHEMA_VERSION:
            raise BankError(f"bank {source}: schema_version {data.get('schema_version')!r}, "
                            f"this coplay reads {BANK_SCHEMA_VERSION}")
        try:
            skills = [Skill.from_json(s) for s in data["skills"]]
            return cls(bank_key=data["bank_key"], version=int(data["version"]),
                       iteration=int(data["iteration"]),
                       skills={s.id: s for s in skills}, next_id=int(data["next_id"]),
                       features=dict(data.get("features", {})),
                       pending=[Instance(**i) for i in data.get("pending", [])],
                       operations=list(data.get("operations", [])), metrics=dict(data.get("metrics", {})),
                       literal_counts=dict(data.get("literal_counts", {})),
                       segments_seen=float(data.get("segments_seen", 0.0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise BankError(f"bank {source}: malformed ({type(exc).__name__}: {exc})") from None


def _id_order(skill_id: str) -> tuple[int, str]:
    digits = skill_id.lstrip("s")
    return (int(digits), skill_id) if digits.isdigit() else (1 << 30, skill_id)


# the policies whose trajectories teach a bank: the decision agent's and the expert bots' (opponents' do not)
TEACHING_POLICIES = frozenset({"model", "expert"})


def bank_key_for(game: str, seat: str = "", role: str = "") -> str:
    """The bank key of a trajectory: per game, and per side where seats differ (Avalon `good` / `evil` by role
    id, Diplomacy per power; docs/architecture.md). The side comes from the game (`coplay_envs.side`)."""
    import coplay_envs

    side = coplay_envs.side(game, seat or role, role or seat)
    return game if side is None else f"{game}/{side}"


def save_bank(run: RunDir, bank: Bank) -> Path:
    """Write `bank` as `banks/<key>/v<version>.json` with its manifest (`coplay.artifacts.manifest`),
    atomically. An existing version is never overwritten (a `BankError` says so): the previous versions are
    never lost."""
    from coplay.artifacts.manifest import write_bank_version

    path = run.bank_path(bank.bank_key, bank.version)
    if path.exists():
        raise BankError(f"{path} already exists: bank {bank.bank_key} v{bank.version} was already published")
    write_bank_version(path, bank.to_bytes(), bank.bank_key, bank.version, bank.iteration)
    return path


def load_bank(run: RunDir, bank_key: str, version: int | None = None) -> Bank:
    """Version `version` of a bank (default: the newest); `BankError` names the file when it is bad."""
    versions = bank_versions(run, bank_key)
    if not versions:
        raise BankError(f"{run.root / 'banks' / bank_key}: no bank versions for key {bank_key!r}")
    if version is None:
        version = versions[-1]
    if version not in versions:
        raise BankError(f"bank {bank_key}: no version {version}; versions on disk: {versions}")
    path = run.bank_path(bank_key, version)
    return Bank.from_bytes(path.read_bytes(), str(path))


def bank_versions(run: RunDir, bank_key: str) -> list[int]:
    """Versions of a bank on disk, ascending."""
    folder = run.root / "banks" / bank_key
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _VERSION_FILE.match(p.name)))


def bank_keys(run: RunDir) -> list[str]:
    """Every bank key with at least one version in the run folder (`avalon/good` style for nested keys)."""
    root = run.root / "banks"
    if not root.is_dir():
        return []
    keys = {str(p.parent.relative_to(root)) for p in root.rglob("v*.json") if _VERSION_FILE.match(p.name)}
    return sorted(keys)
