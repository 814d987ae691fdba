"""One curriculum round on one single-player game (docs/curriculum.md): route prompts, let the proposer
write G tasks per prompt, gate them, let the solver attempt each valid task K times, and reward both.

Returns Samples ready for GRPO through the existing group path (`learn.advantages.sample_group_advantages`):
the proposer's G samples of one prompt share a group id, the solver's `act` samples of the K attempts at one
task share another (each step of an attempt carries that attempt's reward). The model is reached only
through a `ModelCaller` (the rollout workers' engines in a run). No ray, torch or engines here.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coplay.agent.constraint import SUBGOAL_MAX_CHARS, constraint_for
from coplay.agent.parsing import parse_act
from coplay.agent.prompts import act_messages
from coplay.config import CurriculumConfig
from coplay.curriculum.gate import Attempt, Gate, Verdict, passed_share
from coplay.curriculum.prompts import proposer_messages, solver_goal
from coplay.curriculum.rewards import proposer_reward, solver_reward, success_rate
from coplay.curriculum.routing import Router
from coplay.curriculum.task import Task, TaskRejected, parse_task
from coplay.curriculum.task_grammar import task_regex
from coplay.skills.caller import ModelCaller, call_adapter
from coplay.skills.expressions import parse_expression
from coplay.skills.literals import feature_kinds, literals_of_views
from coplay.skills.schema import Skill
from coplay.types import Sample

HINT_CHARS = 400
EXPLORATION_SHOWN = 4
DETAIL_CHARS = 160


@dataclass
class TaskOutcome:
    """One proposed task: the gate's verdict, the solver's K attempts, p and the proposer's reward."""

    verdict: Verdict
    attempts: list[Attempt] = field(default_factory=list)
    p: float = 0.0
    reward: float = 0.0


@dataclass
class RoundResult:
    """What a round produced: trainable Samples, the outcomes, counts by reason and summary metrics."""

    samples: list[Sample]
    outcomes: list[TaskOutcome]
    counts: Counter[str]

    def metrics(self) -> dict[str, Any]:
        """valid_rate and mid_share (valid tasks with p in [0.25, 0.75], over all proposed), per the issue."""
        n = len(self.outcomes)
        valid = [o for o in self.outcomes if o.verdict.valid]
        mid = [o for o in valid if 0.25 <= o.p <= 0.75]
        # exploration-stream tasks the solver solved sometimes: the candidates for new skills
        explored = [o.verdict.task.answer() for o in valid
                    if o.verdict.task is not None and o.verdict.task.skill_id is None and 0.0 < o.p < 1.0]
        return {"proposed": n, "valid_rate": len(valid) / n if n else 0.0,
                "mid_share": len(mid) / n if n else 0.0,
                "mean_proposer_reward": sum(o.reward for o in self.outcomes) / n if n else 0.0,
                "rejected": {k: v for k, v in sorted(self.counts.items()) if k != "valid"},
                "exploration_kept": explored[:EXPLORATION_SHOWN], "exploration_kept_count": len(explored),
                "induction_candidates": self.induction_candidates(), "tasks": self.task_log()}

    def task_log(self) -> list[dict[str, Any]]:
        """Every proposed task in order: its skill (None: the exploration stream), the task as parsed (None
        when it did not parse), the gate's reason (None: valid) and why, p and the proposer's reward, so a
        reader sees what the proposer wrote and why the gate refused it."""
        return [{"skill": o.verdict.task.skill_id if o.verdict.task else None,
                 "task": o.verdict.task.answer() if o.verdict.task else None,
                 "reason": o.verdict.reason, "detail": o.verdict.detail[:DETAIL_CHARS], "p": o.p,
                 "reward": o.reward} for o in self.outcomes]

    def induction_candidates(self) -> list[dict[str, Any]]:
        """Valid exploration-stream tasks the solver solved at least once, with what each successful attempt
        did (its effects from the start position, steps, game reward, intention tag): the next bank update
        proposes them to the curator as new skills (`induce`, `coplay.skills.induction`)."""
        out = []
        for o in self.outcomes:
            task = o.verdict.task
            if not o.verdict.valid or task is None or task.skill_id is not None or o.p <= 0.0:
                continue
            solved = [a for a in o.attempts if a.satisfied]
            out.append({"task": task.answer(), "p": o.p,
                        "attempts": [{"effects": sorted(literals_of_views(a.start_view, a.end_view)),
                                      "steps": a.steps, "reward": a.game_reward,
                                      "tag": a.tag, "start_view": dict(a.start_view),
                                      "end_view": dict(a.end_view)} for a in solved]})
        return out


def _act_answers(caller: ModelCaller, game: str, active: list[dict[str, Any]], prompts: list[Any],
                 max_tokens: int, constrained: bool,
                 intention_chars: int = SUBGOAL_MAX_CHARS) -> list[list[Sample]]:
    """One `act` answer per live attempt; constrained: the ACTION line sampled from the attempt's legal
    actions (`agent.constraint`, as in the rollouts, with their INTENTION budget), one call per distinct
    constraint."""
    if not constrained:
        return caller.complete("act", prompts, 1, max_tokens)
    by_regex: dict[str | None, list[int]] = {}
    for i, s in enumerate(active):
        by_regex.setdefault(constraint_for(game, s["info"], False, True, intention_chars), []).append(i)
    answers: list[list[Sample]] = [[] for _ in active]
    for regex, members in by_regex.items():
        got = caller.complete("act", [prompts[i] for i in members], 1, max_tokens, regex=regex)
        for i, group in zip(members, got, strict=True):
            answers[i] = group
    return answers


def solve(caller: ModelCaller, gate: Gate, tasks: list[tuple[Task, dict[str, Any]]], attempts: int,
          rules: str, max_tokens: int, group_prefix: str,
          reward_scale: float = 0.0, constrained_actions: bool = False,
          prompt_format: str = "full",
          intention_chars: int = SUBGOAL_MAX_CHARS) -> tuple[list[list[Attempt]], list[list[Sample]]]:
    """K attempts at each (task, start state), in lockstep: every step asks the caller once for all live
    attempts (once per distinct action constraint with `constrained_actions`), with the rollouts' `act`
    prompt layout (`prompt_format`). Returns per task its attempts and its solver `act` Samples (rewarded
    per attempt)."""
    import coplay_envs

    live: list[dict[str, Any]] = []
    for t, (task, start) in enumerate(tasks):
        for a in range(attempts):
            env = coplay_envs.make_env(gate.game, **gate.env_kwargs)
            obs, info = env.reset(options={"state": dict(start)})
            live.append({"task": t, "env": env, "obs": obs, "info": info, "steps": 0, "reward": 0.0,
                         "done": False, "ok": False, "samples": [], "bound": task.bound, "tags": Counter(),
                         "start_view": dict(info.get("features", {})),
                         "contract": parse_expression(task.contract), "goal": solver_goal(task),
                         "id": f"{group_prefix}/solve/{t}/{a}"})
    while any(not s["done"] for s in live):
        active = [s for s in live if not s["done"]]
        prompts = [act_messages(gate.game, rules, s["obs"], s["info"]["legal_actions"], s["goal"], [],
                                prompt_format=prompt_format) for s in active]
        answers = _act_answers(caller, gate.game, active, prompts, max_tokens, constrained_actions,
                               intention_chars)
        for s, (sample,) in zip(active, answers, strict=True):
            parsed = parse_act(sample.completion_text, s["info"]["legal_actions"])
            s["obs"], reward, terminated, truncated, s["info"] = s["env"].step(parsed.action)
            s["steps"] += 1
            s["reward"] += float(reward)
            s["tags"][parsed.tag] += bool(parsed.tag)
            sample.group_id, sample.sample_id = f"{group_prefix}/solve/{s['task']}", f"{s['id']}/{s['steps']}"
            s["samples"].append(sample)
            s["ok"] = s["contract"].holds(s["info"]["features"])
            s["done"] = s["ok"] or terminated or truncated or s["steps"] >= s["bound"]
    results: list[list[Attempt]] = [[] for _ in tasks]
    samples: list[list[Sample]] = [[] for _ in tasks]
    for s in live:
        tag = max(sorted(t for t in s["tags"] if t), key=lambda t: s["tags"][t], default="")
        end_view = dict(s["info"].get("features", {}))
        results[s["task"]].append(Attempt(s["ok"], s["steps"], s["reward"], tag, s["start_view"], end_view))
        for sample in s["samples"]:
            sample.reward = solver_reward(s["ok"], s["reward"], reward_scale)
            samples[s["task"]].append(sample)
    return results, samples


def _within_cap(checked: list[tuple[Sample, str | None, Verdict]], max_tasks: int | None) -> list[int]:
    """Indices of the passing tasks the solver plays: whole groups, in order, each that still fits the cap
    (a group too large is skipped, a smaller one after it may still be played)."""
    by_group: dict[str, list[int]] = {}
    for i, (sample, _, verdict) in enumerate(checked):
        by_group.setdefault(sample.group_id, [])
        if verdict.valid and verdict.task and verdict.start_state:
            by_group[sample.group_id].append(i)
    chosen: list[int] = []
    for members in by_group.values():
        if max_tasks is None or len(chosen) + len(members) <= max_tasks:
            chosen += members
    return chosen


def run_round(caller: ModelCaller, gate: Gate, router: Router, skills: Mapping[str, Skill],
              cfg: CurriculumConfig, iteration: int, rules: str, max_tokens: Mapping[str, int],
              seed: int = 0, max_tasks: int | None = None, constrained_actions: bool = False,
              prompt_format: str = "full", intention_chars: int = SUBGOAL_MAX_CHARS) -> RoundResult:
    """Route `cfg.prompts` prompts, sample `cfg.proposals` tasks per prompt, gate them, solve the valid
    ones `cfg.attempts` times, and set every Sample's reward. Skill usage statistics are updated in place
    (`Skill.tasking.usage`); tasks the solver neither always nor never solved become skill examples.
    `max_tasks` caps the tasks the solver plays (the mix share), whole prompt groups at a time; a group
    beyond the cap is not trained (its rewards would be unknown), its passing tasks counted `unplayed`.
    `prompt_format`: the solver's `act` prompt layout (`rollout.prompt_format`); `intention_chars`: its
    INTENTION budget under the constraint (`rollout.intention_chars`)."""
    prefix = f"it{iteration}/curriculum/{gate.game}"
    routed = ([None] * cfg.prompts if cfg.unguided
              else router.pick({k: s.tasking.usage for k, s in skills.items()}, cfg.prompts, iteration))
    _, info = gate.env.reset(seed=seed)
    hint = json.dumps(info["state"], sort_keys=True)[:HINT_CHARS]
    dealt = cfg.position == "dealt"
    prompts = [proposer_messages(gate.game, rules, gate.features, skills[r] if r else None, cfg.max_bound,
                                 hint, dealt) for r in routed]
    kinds = feature_kinds(info["features"])
    regex = task_regex(gate.game, kinds, cfg.max_bound, dealt=dealt) if cfg.constrained_tasks else None
    groups = call_adapter(caller, "propose", prompts, cfg.proposals, max_tokens["propose"], prefix,
                          regex=regex)
    checked: list[tuple[Sample, str | None, Verdict]] = []
    expert = gate.reference == "expert"
    for skill_id, group in zip(routed, groups, strict=True):
        validator = (skills[skill_id].tasking.validator or skills[skill_id].preconditions) if skill_id else ""
        for sample in group:
            try:
                task = parse_task(sample.completion_text, gate.game, max_bound=cfg.max_bound, seed=seed,
                                  skill_id=skill_id, dealt=dealt)
            except TaskRejected as rejected:
                checked.append((sample, skill_id, Verdict(False, rejected.reason, rejected.detail)))
                continue
            # the expert reference judges before the solver plays (no attempts wasted on impossible tasks);
            # the solver reference can only judge after its attempts
            checked.append((sample, skill_id, gate.check(task, validator=validator) if expert
                            else gate.precheck(task, validator)))
    played_idx = _within_cap(checked, max_tasks)
    attempts, solver_samples = solve(caller, gate, [(checked[i][2].task, checked[i][2].start_state)
                                                    for i in played_idx],  # type: ignore[misc]
                                     cfg.attempts, rules, max_tokens["act"], prefix, cfg.game_reward_scale,
                                     constrained_actions, prompt_format, intention_chars)
    played = dict(zip(played_idx, zip(attempts, solver_samples, strict=True), strict=True))
    outcomes: list[TaskOutcome] = []
    trained: list[Sample] = []
    unplayed_groups: set[str] = set()
    for i, (sample, skill_id, pre) in enumerate(checked):
        if pre.valid and i not in played:
            gate.counts["unplayed"] += 1
            unplayed_groups.add(sample.group_id)
            continue
        mine, steps = played.get(i, ([], []))
        if expert and (pre.valid or pre.task is not None):  # judged (and counted) by gate.check already
            verdict = pre
        elif pre.valid and pre.task:
            verdict = gate.check(pre.task, solver=mine)
        else:
            verdict = gate.reject(pre.reason or "schema", pre.detail, pre.task)
        p = success_rate([a.satisfied for a in mine]) if verdict.valid else 0.0
        sample.reward = proposer_reward(verdict.valid, p, passed_share(verdict.reason), cfg.gate_credit)
        outcomes.append(TaskOutcome(verdict, mine, p, sample.reward))
        if verdict.valid:
            trained += steps  # the solver learns only on valid tasks
        if skill_id is not None:
            spec = skills[skill_id].tasking
            spec.usage.record(iteration, verdict.valid, [a.satisfied for a in mine] if verdict.valid else [])
            if verdict.valid and verdict.task and 0.0 < p < 1.0:
                spec.add_example(verdict.task.answer())
    proposer_samples = [s for g in groups for s in g if s.group_id not in unplayed_groups]
    return RoundResult(proposer_samples + trained, outcomes, Counter(gate.counts))
