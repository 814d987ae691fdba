"""The curriculum step of an iteration (docs/curriculum.md): with `curriculum.enabled`, per single-player
game a round (`coplay.curriculum.round`) through the rollout workers' engines; its proposer and solver
Samples join the iteration's learner batch through the bank-sample path (grouped by `group_id`). Skill usage
statistics persist in `curriculum/usage.json` of the run folder, each iteration's summary in
`curriculum/it<k>.json`. Without the curriculum it returns nothing and touches nothing.
"""

from __future__ import annotations

import json
import math
from typing import Any

from coplay.config import CoplayConfig
from coplay.files import write_bytes_atomic
from coplay.skills.tasking import TaskUsage
from coplay.types import Sample


def _load_usage(path: Any) -> dict[str, dict[str, TaskUsage]]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        return {game: {sid: TaskUsage(**u) for sid, u in skills.items()} for game, skills in data.items()}
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: not a curriculum usage file ({err}); move it away to start afresh") \
            from None


def curriculum_samples(system: Any, cfg: CoplayConfig, iteration: int, versions: dict[str, int],
                       bank_versions: dict[str, int]) -> list[Sample]:
    """Run the iteration's curriculum rounds; the Samples to train on (none when the curriculum is off)."""
    cur = cfg.curriculum
    if not cur.enabled:
        return []
    import coplay_envs
    from coplay.actors.curriculum_caller import worker_caller
    from coplay.curriculum.gate import Gate
    from coplay.curriculum.round import run_round
    from coplay.curriculum.routing import Router

    folder = system.run.root / "curriculum"
    usage_path = folder / "usage.json"
    usage = _load_usage(usage_path)
    names = {a: f"{a}@v{versions[a]}" for a in ("propose", "act")}
    caller = worker_caller(system.workers, names, cfg.sampling.temperature,
                           cfg.seeds.run * 1_000_003 + iteration * 10_007 + 7)
    banks = system.banks_for(bank_versions)
    samples: list[Sample] = []
    summary: dict[str, Any] = {}
    games = [g for g in cfg.games if coplay_envs.spec(g).api == "gymnasium"]
    episodes = cfg.rollout.start_states * cfg.rollout.group_size
    max_tasks = math.ceil(cur.mix_share * episodes / cur.attempts)
    for game in games:
        bank = banks.get(game)
        skills = dict(bank.skills) if bank is not None else {}
        for sid, skill in skills.items():
            skill.tasking.usage = usage.get(game, {}).get(sid, skill.tasking.usage)
        gate = Gate(game, env_kwargs=cfg.game[game].env_kwargs, max_bound=cur.max_bound,
                    reference=cur.reference, reference_attempts=cur.reference_attempts,
                    reject_trivial=cur.reject_trivial)
        router = Router(cur.routing, cur.exploration_share, cur.retire_success, cur.retire_after, cur.seed)
        seed = cfg.seeds.train.start + (cur.seed * 7919 + iteration) % (cfg.seeds.train.stop -
                                                                       cfg.seeds.train.start)
        result = run_round(caller, gate, router, skills, cur, iteration, coplay_envs.rules(game),
                           dict(cfg.sampling.max_tokens.items()), seed=seed, max_tasks=max_tasks)
        usage[game] = {sid: s.tasking.usage for sid, s in skills.items()}
        frozen = set(cur.freeze)
        samples += [s for s in result.samples if s.adapter not in frozen]
        summary[game] = result.metrics()
    write_bytes_atomic(usage_path, json.dumps(
        {g: {sid: vars(u) for sid, u in skills.items()} for g, skills in usage.items()}, indent=1).encode())
    write_bytes_atomic(folder / f"it{iteration}.json", json.dumps(summary, indent=1).encode())
    return samples
