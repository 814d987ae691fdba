"""Skill analysis: the figures COS-PLAY reports about a run's skills, computed once for the run report and
`coplay bank report` (docs/skill-analysis.md says what each figure means).

Two sources, both already in the run folder; nothing new is recorded for it:
- the bank versions `banks/<key>/v<n>.json`: each version's skills (with their `lineage`, `tags` counts and
  usage `stats`) and the `operations` applied to make it. Skills discovered, active, absorbed by merges and
  splits, retired, evicted and each skill's lineage come from these.
- the trajectory shards `shards/it*.msgpack`: each step of the policy's own seats (`policy == "model"`)
  records the skill the decision agent was running (`Step.skill_id`) and how that use ended
  (`Step.skill_event`: success, abort, or `switch` when the `act` answer said `SKILL: SWITCH`). Uses per
  skill, episodes per skill, skill duration in steps and skill switches per episode are computed from these.

A *use* is a maximal run of consecutive steps with the same active skill that no ending event (success,
abort, switch) cuts: it ends at such an event, at a step with another skill ("changed"), at a step with no
skill ("no skill"), or at the episode's end. A *switch* is a use whose skill differs from the previous use's
skill in the same episode (s1 then s2 is one switch; s2, a step without a skill, then s2 again is none).

Pure: standard library and coplay's run folder, bank schema and shard codec only; never imports ray, torch or
matplotlib. Files that cannot be read are named in `SkillAnalysis.problems`, never skipped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coplay.agent.parsing import INTENTION_TAGS
from coplay.runs import RunDir
from coplay.skills.boundaries import intention_tag
from coplay.skills.schema import Bank, BankError, bank_key_for, bank_keys, bank_versions, load_bank
from coplay.types import ShardError, Trajectory, read_shard

CREATING = ("materialize", "merge", "split", "induce")  # operations whose `new` skills are discoveries
ENDING_EVENTS = ("success", "abort", "switch")
POLICY = "model"  # the learner's own seats (opponents and bots are left out)
OTHER_TAG = "other"  # a first word that is not one of the intention tags (an answer that did not parse)


@dataclass
class LineageEntry:
    """One step of a skill's history as the skill records it: the operation, its parents, the iteration."""

    op: str
    parents: list[str]
    iteration: int

    def text(self) -> str:
        parents = "+".join(self.parents)
        return f"{self.op}{' ' + parents if parents else ''} @it{self.iteration}"


@dataclass
class SkillRecord:
    """One skill over the run. `made_by`: the operation that created it in this run (`materialize`, `merge`,
    `split`), `inherited` (in the first version on disk without a creating operation, e.g. a bank from another
    run) or `unrecorded` (appeared later without one). `ended_by`: "" while the newest version holds it, else
    `merge` / `split` (absorbed; `ended_into` names the result), `retire`, `evict` or `unrecorded`.
    `bank_uses` / `bank_mean_duration`: segments the bank labelled with it (its `stats`); `play_*`: the
    decision agent's uses, steps and episodes with it active."""

    id: str
    name: str = ""
    made_by: str = "unrecorded"
    parents: list[str] = field(default_factory=list)
    born_version: int = 0
    born_iteration: int = 0
    lineage: list[LineageEntry] = field(default_factory=list)
    last_version: int = 0
    ended_by: str = ""
    ended_into: list[str] = field(default_factory=list)
    ended_version: int | None = None
    ended_iteration: int | None = None
    tags: dict[str, int] = field(default_factory=dict)
    bank_uses: int = 0
    bank_mean_duration: float = 0.0
    play_uses: int = 0
    play_steps: int = 0
    play_episodes: int = 0


@dataclass
class VersionRow:
    """One bank version: skills in it (`active`), created by its operations (`discovered`; `discovered_total`
    counts inherited ones too, cumulatively), removed into a merge or split, retired, evicted, refined,
    proposals not applied, and the intention-tag counts of its skills' instances (`tags`)."""

    version: int
    iteration: int
    active: int = 0
    discovered: int = 0
    discovered_total: int = 0
    absorbed_by_merge: int = 0
    absorbed_by_split: int = 0
    retired: int = 0
    evicted: int = 0
    refined: int = 0
    not_applied: int = 0
    tags: dict[str, int] = field(default_factory=dict)


@dataclass
class PlayRow:
    """The policy's episodes of one iteration: skill uses, their mean duration in steps, switches and
    `SKILL: SWITCH` answers per episode, how uses ended, and the intention tags of the steps."""

    iteration: int
    episodes: int = 0
    steps: int = 0
    steps_with_skill: int = 0
    uses: int = 0
    mean_duration: float | None = None
    switches_per_episode: float = 0.0
    switch_requests_per_episode: float = 0.0
    ended: dict[str, int] = field(default_factory=dict)
    tags: dict[str, int] = field(default_factory=dict)


@dataclass
class SkillSummary:
    """The run's figures for one bank. Figures from trajectories are None when the policy played no episode
    of this bank in the shards (nothing to average)."""

    versions: int = 0
    active: int = 0
    discovered: int = 0
    inherited: int = 0
    absorbed_by_merge: int = 0
    absorbed_by_split: int = 0
    retired: int = 0
    evicted: int = 0
    episodes: int = 0
    mean_episodes_per_skill: float | None = None
    mean_skill_duration: float | None = None
    bank_mean_duration: float | None = None
    switches_per_episode: float | None = None
    switch_requests_per_episode: float | None = None


@dataclass
class BankAnalysis:
    """Everything about one bank key."""

    key: str
    summary: SkillSummary
    versions: list[VersionRow]
    skills: list[SkillRecord]
    play: list[PlayRow]

    def most_used(self, n: int = 10) -> list[SkillRecord]:
        """Skills by the decision agent's uses, then steps, then the bank's labelled segments."""
        return sorted(self.skills,
                      key=lambda s: (-s.play_uses, -s.play_steps, -s.bank_uses, _id_order(s.id)))[:n]


@dataclass
class SkillAnalysis:
    """One `BankAnalysis` per bank key, and the files that could not be read."""

    banks: dict[str, BankAnalysis]
    problems: list[str] = field(default_factory=list)


@dataclass
class Use:
    """One use of a skill in an episode: how many steps, how it ended."""

    skill: str
    steps: int
    ended: str


@dataclass
class EpisodeSkills:
    """What the analysis keeps of one trajectory of the policy (the observations are dropped)."""

    key: str
    episode_id: str
    iteration: int
    steps: int
    uses: list[Use]
    switch_requests: int
    tags: dict[str, int]

    @property
    def switches(self) -> int:
        return sum(1 for a, b in zip(self.uses, self.uses[1:], strict=False) if a.skill != b.skill)


def _id_order(skill_id: str) -> tuple[int, str]:
    digits = skill_id.lstrip("s")
    return (int(digits), skill_id) if digits.isdigit() else (1 << 30, skill_id)


def tag_counts(tags: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Counts per intention tag, sorted; words that are not intention tags are counted as `other`."""
    out: Counter[str] = Counter()
    for tag, n in tags:
        if tag:
            out[tag if tag in INTENTION_TAGS else OTHER_TAG] += n
    return dict(sorted(out.items()))


def episode_skills(traj: Trajectory) -> EpisodeSkills:
    """Split a trajectory's steps into skill uses (module docstring)."""
    uses: list[Use] = []
    current: Use | None = None
    for step in traj.steps:
        skill = step.skill_id or None  # "" is no skill too
        if current is not None and skill != current.skill:
            current.ended = "no skill" if skill is None else "changed"
            current = None
        if skill is not None:
            if current is None:
                current = Use(skill, 0, "episode end")
                uses.append(current)
            current.steps += 1
            if step.skill_event in ENDING_EVENTS:
                current.ended, current = step.skill_event, None
    tags = tag_counts((intention_tag(s.intention), 1) for s in traj.steps)
    return EpisodeSkills(bank_key_for(traj.game, traj.seat, traj.role), traj.episode_id, traj.iteration,
                         len(traj.steps), uses, sum(1 for s in traj.steps if s.skill_event == "switch"),
                         tags)


def skill_use(trajectories: Iterable[Trajectory]) -> dict[str, Any]:
    """One iteration's skill use by the policy's own seats, for its metrics line: the steps run under a skill,
    the uses started (a skill picked), how they ended (`success`, `abort`, `switch`: the `act` answer said
    `SKILL: SWITCH`; `changed`, `no skill`, `episode end`), and per skill its uses, successes, aborts and
    switches. A skill that aborts far more often than it succeeds is one the policy cannot run; the bank's
    maintenance reads the same events (`coplay.skills.maintenance`)."""
    steps = with_skill = 0
    ended: Counter[str] = Counter()
    per_skill: dict[str, Counter[str]] = {}
    for traj in trajectories:
        if traj.policy != POLICY:
            continue
        episode = episode_skills(traj)
        steps += episode.steps
        for use in episode.uses:
            with_skill += use.steps
            ended[use.ended] += 1
            counts = per_skill.setdefault(use.skill, Counter())
            counts["uses"] += 1
            counts[use.ended] += 1
    return {"steps": steps, "steps_with_skill": with_skill, "uses": sum(ended.values()),
            "ended": dict(sorted(ended.items())),
            "per_skill": {sid: {k: c[k] for k in ("uses", *ENDING_EVENTS)}
                          for sid, c in sorted(per_skill.items())}}


def read_episodes(run: RunDir, problems: list[str]) -> Iterator[EpisodeSkills]:
    """The policy's trajectories of every iteration shard, one shard in memory at a time; a shard that does
    not decode is named in `problems` and the others still count."""
    for path in sorted(run.shards.glob("*.msgpack")):
        try:
            shard = read_shard(path)
        except ShardError as exc:
            problems.append(f"{exc} (its episodes are left out of the skill analysis)")
            continue
        for traj in shard.trajectories:
            if traj.policy == POLICY:
                yield episode_skills(traj)


def _ids(value: object) -> list[str] | None:
    return [str(v) for v in value] if isinstance(value, list) else None


def _lineage(raw: Sequence[Mapping[str, object]]) -> list[LineageEntry]:
    """A skill's `lineage` entries (entries that are not objects are left out: they say nothing)."""
    out = []
    for entry in raw:
        if not isinstance(entry, Mapping):
            continue
        iteration = entry.get("iteration", 0)
        out.append(LineageEntry(str(entry.get("op", "")), _ids(entry.get("parents", [])) or [],
                                int(iteration) if isinstance(iteration, int | float) else 0))
    return out


def _end(record: SkillRecord, how: str, into: list[str], bank: Bank) -> None:
    record.ended_by, record.ended_into = how, into
    record.ended_version, record.ended_iteration = bank.version, bank.iteration


def bank_history(history: Sequence[Bank],
                 problems: list[str]) -> tuple[list[VersionRow], dict[str, SkillRecord]]:
    """Per version counts and every skill's record, from the versions in ascending order. An operation
    record without the fields `update_bank` writes is named in `problems` and left out."""
    records: dict[str, SkillRecord] = {}
    rows: list[VersionRow] = []
    previous: set[str] = set()
    for index, bank in enumerate(history):
        row = VersionRow(bank.version, bank.iteration, active=len(bank.skills))
        removed: set[str] = set()
        for i, op in enumerate(bank.operations):
            targets = _ids(op.get("targets", [])) if isinstance(op, dict) else None
            new = _ids(op.get("new", [])) if isinstance(op, dict) else None
            if not isinstance(op, dict) or targets is None or new is None:
                problems.append(f"bank {bank.bank_key} v{bank.version}: operation {i} is not an object with "
                                f"lists 'targets' and 'new' ({str(op)[:120]}); the analysis leaves it out")
                continue
            if not op.get("applied", True):
                row.not_applied += 1
                continue
            kind = str(op.get("op"))
            if kind in CREATING:
                row.discovered += len(new)
                for sid in new:
                    rec = records.setdefault(sid, SkillRecord(sid))
                    rec.made_by, rec.parents = kind, targets
                    rec.born_version = rec.last_version = bank.version
                    rec.born_iteration = bank.iteration
            if kind == "refine":
                row.refined += len(targets)
                continue
            row.absorbed_by_merge += len(targets) if kind == "merge" else 0
            row.absorbed_by_split += len(targets) if kind == "split" else 0
            row.retired += len(targets) if kind == "retire" else 0
            row.evicted += len(targets) if kind == "evict" else 0
            for target in targets:
                if target not in bank.skills:  # an operation that keeps its target's id does not end it
                    removed.add(target)
                    _end(records.setdefault(target, SkillRecord(target)), kind,
                         new if kind in CREATING else [], bank)
        for sid, skill in bank.skills.items():
            rec = records.get(sid)
            lineage = _lineage(skill.lineage)
            if rec is None:
                rec = records[sid] = SkillRecord(sid, made_by="inherited" if index == 0 else "unrecorded",
                                                 born_version=bank.version, born_iteration=bank.iteration)
                if index == 0:
                    row.discovered_total += 1  # the cumulative count starts with the inherited skills
                elif lineage:
                    rec.parents = list(lineage[0].parents)  # what the skill says, lacking an operation
            if rec.ended_by:  # back after it left (a version missing from the folder)
                rec.ended_by, rec.ended_into, rec.ended_version, rec.ended_iteration = "", [], None, None
            rec.name, rec.lineage, rec.tags = skill.name, lineage, tag_counts(skill.tags.items())
            rec.bank_uses, rec.bank_mean_duration = skill.stats.uses, skill.stats.mean_duration
            rec.last_version = bank.version
        for sid in previous - set(bank.skills) - removed:
            _end(records[sid], "unrecorded", [], bank)
        previous = set(bank.skills)
        row.tags = tag_counts((t, n) for skill in bank.skills.values() for t, n in skill.tags.items())
        row.discovered_total += row.discovered + (rows[-1].discovered_total if rows else 0)
        rows.append(row)
    return rows, records


def play_rows(episodes: Sequence[EpisodeSkills]) -> list[PlayRow]:
    """Per iteration figures of the policy's episodes."""
    by_iteration: dict[int, list[EpisodeSkills]] = {}
    for ep in episodes:
        by_iteration.setdefault(ep.iteration, []).append(ep)
    rows = []
    for iteration in sorted(by_iteration):
        eps = by_iteration[iteration]
        uses = [u for ep in eps for u in ep.uses]
        tags: Counter[str] = Counter()
        for ep in eps:
            tags.update(ep.tags)
        rows.append(PlayRow(
            iteration, episodes=len(eps), steps=sum(ep.steps for ep in eps),
            steps_with_skill=sum(u.steps for u in uses), uses=len(uses),
            mean_duration=sum(u.steps for u in uses) / len(uses) if uses else None,
            switches_per_episode=sum(ep.switches for ep in eps) / len(eps),
            switch_requests_per_episode=sum(ep.switch_requests for ep in eps) / len(eps),
            ended=dict(sorted(Counter(u.ended for u in uses).items())), tags=dict(sorted(tags.items()))))
    return rows


def analyse_bank(key: str, history: Sequence[Bank], episodes: Sequence[EpisodeSkills],
                 problems: list[str]) -> BankAnalysis:
    """The analysis of one bank key from its versions (ascending) and the policy's episodes of that key."""
    versions, records = bank_history(history, problems)
    seen_in: dict[str, set[str]] = {}
    unknown: Counter[str] = Counter()
    for ep in episodes:
        for use in ep.uses:
            rec = records.get(use.skill)
            if rec is None:
                unknown[use.skill] += 1
                continue
            rec.play_uses += 1
            rec.play_steps += use.steps
            seen_in.setdefault(use.skill, set()).add(ep.episode_id)
    if unknown:
        problems.append(f"bank {key}: the policy ran skills that no bank version on disk holds "
                        f"({dict(sorted(unknown.items()))} uses); they are left out of the per-skill figures")
    for sid, eps in seen_in.items():
        records[sid].play_episodes = len(eps)
    skills = sorted(records.values(), key=lambda r: _id_order(r.id))
    uses = [u for ep in episodes for u in ep.uses]
    latest = history[-1] if history else None
    weighted = [(s.stats.uses, s.stats.mean_duration) for s in latest.skills.values()] if latest else []
    n_uses = sum(n for n, _ in weighted)
    summary = SkillSummary(
        versions=len(versions), active=versions[-1].active if versions else 0,
        discovered=sum(r.discovered for r in versions),
        inherited=sum(1 for r in records.values() if r.made_by == "inherited"),
        absorbed_by_merge=sum(r.absorbed_by_merge for r in versions),
        absorbed_by_split=sum(r.absorbed_by_split for r in versions),
        retired=sum(r.retired for r in versions), evicted=sum(r.evicted for r in versions),
        episodes=len(episodes),
        mean_episodes_per_skill=(sum(r.play_episodes for r in skills) / len(skills)
                                 if episodes and skills else None),
        mean_skill_duration=sum(u.steps for u in uses) / len(uses) if uses else None,
        bank_mean_duration=sum(n * d for n, d in weighted) / n_uses if n_uses else None,
        switches_per_episode=sum(ep.switches for ep in episodes) / len(episodes) if episodes else None,
        switch_requests_per_episode=(sum(ep.switch_requests for ep in episodes) / len(episodes)
                                     if episodes else None))
    return BankAnalysis(key, summary, versions, skills, play_rows(episodes))


def analyse(banks: Mapping[str, Sequence[Bank]], episodes: Iterable[EpisodeSkills],
            problems: list[str] | None = None) -> SkillAnalysis:
    """The analysis of every bank key in `banks` (versions ascending). Episodes of keys without a bank (a
    run with skills off) are left out."""
    problems = [] if problems is None else problems
    by_key: dict[str, list[EpisodeSkills]] = {}
    for ep in episodes:
        by_key.setdefault(ep.key, []).append(ep)
    out = {key: analyse_bank(key, history, by_key.get(key, []), problems)
           for key, history in sorted(banks.items()) if history}
    return SkillAnalysis(out, problems)


def load_skill_analysis(run_dir: str | Path | RunDir, game: str | None = None,
                        banks: Mapping[str, Sequence[Bank]] | None = None) -> SkillAnalysis:
    """Read a run folder and analyse its banks (only those of `game`, a game or bank key, when given).
    `banks`: versions already read (the run report's), so they are not read twice. A bank version that
    cannot be read is named in `problems`; a `game` with no bank is a `BankError` naming the keys on disk."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    problems: list[str] = []
    if banks is None:
        read: dict[str, list[Bank]] = {}
        for key in bank_keys(run):
            for version in bank_versions(run, key):
                try:
                    read.setdefault(key, []).append(load_bank(run, key, version))
                except BankError as exc:
                    problems.append(str(exc))
        banks = read
    if game is not None:
        chosen = {k: v for k, v in banks.items() if k == game or k.split("/", 1)[0] == game}
        if not chosen:
            raise BankError(f"{run.root / 'banks'}: no banks for game {game!r}; "
                            f"keys on disk: {sorted(banks)}")
        banks = chosen
    keys = set(banks)
    episodes = [ep for ep in read_episodes(run, problems) if ep.key in keys]
    return analyse(banks, episodes, problems)
