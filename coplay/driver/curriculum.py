"""The curriculum step of an iteration (docs/curriculum.md): with `curriculum.enabled`, per single-player
game a round (`coplay.curriculum.round`) through the rollout workers' engines; its proposer and solver
Samples join the iteration's learner batch through the bank-sample path (grouped by `group_id`). Each skill's
tasking record (rules, examples, usage) persists in `curriculum/tasking.json` of the run folder, each
iteration's summary in `curriculum/it<k>.json`. Without the curriculum it returns nothing and touches nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coplay.config import CoplayConfig
from coplay.driver.progress import phase
from coplay.files import write_bytes_atomic
from coplay.skills.schema import Skill
from coplay.skills.tasking import TaskSpec
from coplay.types import Sample


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err}); move it away to start the curriculum afresh") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object; move it away to start the curriculum afresh")
    return data


def _skills(bank: Any, saved: dict[str, Any]) -> dict[str, Skill]:
    """The bank's skills with the tasking records the curriculum kept for them (the bank's own otherwise)."""
    skills = dict(bank.skills) if bank is not None else {}
    for sid, skill in skills.items():
        if sid in saved:
            skill.tasking = TaskSpec.from_json(saved[sid])
    return skills


def curriculum_samples(system: Any, cfg: CoplayConfig, iteration: int, versions: dict[str, int],
                       bank_versions: dict[str, int]) -> list[Sample]:
    """Run the iteration's curriculum rounds, a console phase of their own; the Samples to train on (none
    when the curriculum is off)."""
    if not cfg.curriculum.enabled:
        return []
    with phase(f"iteration {iteration}: curriculum rounds"):
        return curriculum_rounds(system, cfg, iteration, versions, bank_versions)


def curriculum_rounds(system: Any, cfg: CoplayConfig, iteration: int, versions: dict[str, int],
                      bank_versions: dict[str, int]) -> list[Sample]:
    """One round per single-player game (`coplay.curriculum.round`), with the tasking records kept."""
    cur = cfg.curriculum
    import coplay_envs
    from coplay.actors.curriculum_caller import worker_caller
    from coplay.curriculum.controller import refine_rules, saturated_skills
    from coplay.curriculum.gate import Gate
    from coplay.curriculum.round import run_round
    from coplay.curriculum.routing import Router

    folder = system.run.root / "curriculum"
    tasking = _read_json(folder / "tasking.json")
    frozen_path = folder / "frozen_banks.json"
    if "bank" in cur.freeze:  # the ablation: the proposer always sees the banks of its first iteration
        bank_versions = _read_json(frozen_path) or dict(bank_versions)
        write_bytes_atomic(frozen_path, json.dumps(bank_versions).encode())
    names = {a: f"{a}@v{versions[a]}" for a in ("propose", "act")}
    caller = worker_caller(system.workers, names, cfg.sampling.temperature,
                           cfg.seeds.run * 1_000_003 + iteration * 10_007 + 7)
    banks = system.banks_for(bank_versions)
    samples: list[Sample] = []
    summary: dict[str, Any] = {}
    max_tasks = cur.max_tasks(cfg.rollout.start_states * cfg.rollout.group_size)
    span = cfg.seeds.train.stop - cfg.seeds.train.start
    for game in (g for g in cfg.games if coplay_envs.spec(g).api == "gymnasium"):
        skills = _skills(banks.get(game), tasking.get(game, {}))
        gate = Gate(game, env_kwargs=cfg.game[game].env_kwargs, max_bound=cur.max_bound,
                    reference=cur.reference, reference_attempts=cur.reference_attempts,
                    reject_trivial=cur.reject_trivial)
        router = Router(cur.routing, cur.exploration_share, cur.retire_success, cur.retire_after, cur.seed)
        seed = cfg.seeds.train.start + (cur.seed * 7919 + iteration) % span
        result = run_round(caller, gate, router, skills, cur, iteration, coplay_envs.rules(game),
                           dict(cfg.sampling.max_tokens.items()), seed=seed, max_tasks=max_tasks,
                           constrained_actions=cfg.rollout.constrained_actions,
                           prompt_format=cfg.rollout.prompt_format,
                           intention_chars=cfg.rollout.intention_chars)
        for skill in skills.values():
            skill.tasking.rules = refine_rules(skill.tasking)
        tasking[game] = {sid: s.tasking.to_json() for sid, s in skills.items()}
        samples += [s for s in result.samples if s.adapter not in cur.freeze]
        summary[game] = {**result.metrics(),
                         "saturated": saturated_skills(skills, cur.retire_success, cur.retire_after)}
    write_bytes_atomic(folder / "tasking.json", json.dumps(tasking, indent=1, sort_keys=True).encode())
    write_bytes_atomic(folder / f"it{iteration}.json", json.dumps(summary, indent=1).encode())
    return samples


def induction_candidates(run_root: Path, iteration: int) -> dict[str, list[dict[str, Any]]]:
    """Per bank key, the exploration-stream tasks of iteration `iteration`'s curriculum that the solver
    reached (`curriculum/it<k>.json`), for the bank update over that iteration to propose as `induce`."""
    from coplay.skills.schema import bank_key_for

    summary = _read_json(run_root / "curriculum" / f"it{iteration}.json")
    return {bank_key_for(game): list(body["induction_candidates"]) for game, body in sorted(summary.items())
            if isinstance(body, dict) and body.get("induction_candidates")}
