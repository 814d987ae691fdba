"""How much of the decision agent's reward comes from the game and how much from the skill shaping, under the
paper's weights and under the defaults (`rewards` in the config, docs/rewards.md), on 2048.

Why: in the `full` co-evolution run on 2048 (12-move episodes) the skill terms outweighed the game's return
(0.01 x the merge score, about 0.4 per episode), so GRPO mostly learned to satisfy contract literals. This
measures the shares that the run's metrics line reports (`reward_shares`), without a model: a seed bank is
built as the cold start builds it (expert episodes of the last training seeds, `coplay.skills.teacher`), then
the expert and the random bot play episodes on which skills are tracked as the decision agent tracks them
(the bank's top-ranked candidate is taken whenever retrieval is due, `rollout.retrieve_every`; success and
abort by the bank's own expressions), and `coplay.learn.rewards.assign_rewards` splits each reward into its
parts. Bots and bank only: no model, no Ray; about 15 s.

Writes `--out`/reward-shares-2048.json (per horizon, bot and weighting: each part's absolute sum per
episode and its share, the command and the commit) and prints it.

    python -m benchmarks.reward_shares [--episodes 32] [--horizons 12,50] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GAME = "2048"


def tracked_episode(skills: Any, policy: str, seed: int, moves: int, retrieve_every: int) -> Any:
    """One bot episode with skills tracked as `coplay.agent.decision.DecisionAgent` does: a retrieval (a
    `retrieve` sample choosing the top-ranked candidate) when no skill is active or every K steps; a skill
    ends when the bank says it succeeded or aborted. Every step has one `act` sample."""
    import coplay_envs
    from coplay.types import Sample, Step, Trajectory

    env = coplay_envs.make_env(GAME)
    bot = coplay_envs.make_bot(GAME, policy, seed=seed)
    observation, info = env.reset(seed=seed)
    steps: list[Step] = []
    samples: list[Sample] = []
    active: str | None = None
    active_steps, last_retrieval = 0, -1
    for t in range(moves):
        features = dict(info["features"])
        if active is not None and steps:
            status = skills.status(active, features, active_steps)
            if status != "active":
                steps[-1].skill_event = status
                active = None
        ids = []
        if active is None or (retrieve_every and t - last_retrieval >= retrieve_every):
            candidates = skills.candidates(features, observation, 3)
            active, active_steps, last_retrieval = (candidates[0][0] if candidates else None), 0, t
            ids.append(f"{seed}/t{t}/retrieve")
        ids.append(f"{seed}/t{t}/act")
        action = bot.act(observation, info).action
        observation, reward, terminated, truncated, info = env.step(action)
        steps.append(Step(t=t, observation="", action=action, reward=float(reward),
                          score=float(info["score"]), skill_id=active, features_before=features,
                          features_after=dict(info["features"]), sample_ids=ids))
        samples += [Sample(adapter=sid.rsplit("/", 1)[-1], adapter_version=0, prompt_ids=[0],
                           completion_ids=[0], logprobs=[0.0], group_id="g", sample_id=sid) for sid in ids]
        active_steps += active is not None
        if terminated or truncated:
            break
    return Trajectory(episode_id=f"{policy}-{seed}", game=GAME, seat="solo", role="solo", seed=seed,
                      steps=steps, samples=samples)


def measure(episodes: int, horizons: list[int], teacher_episodes: int, teacher_moves: int,
            retrieve_every: int) -> dict[str, Any]:
    from coplay.agent.bank_view import BankSkills
    from coplay.config import CoplayConfig
    from coplay.config.rewards import ActShaping, RetrieveShaping
    from coplay.learn.rewards import assign_rewards, merge_totals, reward_shares
    from coplay.rollout.bot_episodes import play_bot_episodes
    from coplay.skills.schema import Bank
    from coplay.skills.teacher import seed_bank

    cfg = CoplayConfig()
    stop = cfg.seeds.train.stop
    teacher = play_bot_episodes(GAME, "expert", list(range(stop - teacher_episodes, stop)), teacher_moves)
    bank, _ = seed_bank(Bank(bank_key=GAME), teacher, cfg.skill_bank)
    skills = BankSkills(bank)

    def contract_of(skill_id: str) -> list[str]:
        return list(bank.get(skill_id).contract.literals)

    def holds(skill_id: str, features: Any) -> bool:
        return bank.get(skill_id).expression("preconditions").holds(features)

    weightings = {"paper": (ActShaping(contract_literal=0.1, skill_success=0.3, skill_abort=0.1,
                                       skill_switch=0.1),
                            RetrieveShaping(contract_share=0.5, precondition_miss=0.5)),
                  "default": (cfg.rewards.act, cfg.rewards.retrieve)}
    rows = []
    for moves in horizons:
        for policy in ("expert", "random"):
            trajectories = [tracked_episode(skills, policy, seed, moves, retrieve_every)
                            for seed in range(episodes)]
            for name, (act_w, retrieve_w) in weightings.items():
                window = cfg.skill_bank.contracts.literal_window
                totals = merge_totals([assign_rewards(t, cfg.rewards.game_scale[GAME], contract_of, holds,
                                                      cfg.learner.gamma, window, act_w, retrieve_w)
                                       for t in trajectories])
                rows.append({"horizon": moves, "policy": policy, "weights": name,
                             "per_episode": {a: {k: round(v / episodes, 4) for k, v in parts.items()}
                                             for a, parts in totals.items()},
                             "shares": {a: {k: round(v, 4) for k, v in parts.items()}
                                        for a, parts in reward_shares(totals).items()}})
    return {"bank_skills": len(bank.skills), "rows": rows,
            "weights": {name: {"act": a.model_dump(), "retrieve": r.model_dump()}
                        for name, (a, r) in weightings.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=32, help="episodes per bot and horizon")
    parser.add_argument("--horizons", default="12,50", help="moves per episode, comma separated")
    parser.add_argument("--teacher-episodes", type=int, default=64, help="expert episodes of the seed bank")
    parser.add_argument("--teacher-moves", type=int, default=60)
    parser.add_argument("--retrieve-every", type=int, default=4, help="rollout.retrieve_every (K)")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = measure(args.episodes, [int(h) for h in args.horizons.split(",")], args.teacher_episodes,
                     args.teacher_moves, args.retrieve_every)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    words = argv if argv is not None else sys.argv[1:]
    doc = {"command": " ".join(["python -m benchmarks.reward_shares", *words]),
           "commit": commit, "game": GAME, "episodes": args.episodes, "seconds": round(
               time.perf_counter() - started, 1), **result}
    text = json.dumps(doc, indent=1)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"reward-shares-{GAME}.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
