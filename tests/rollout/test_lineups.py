"""Fair self-play groups (issue 19, item 1): one line-up per GRPO group, the learner's seat on a role
schedule, full self-play, and advantages per seat within a group. Plans are the real `iteration_plans`;
the played test runs real Avalon and Diplomacy games with a scripted engine (real tokenizer)."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict

import pytest

import coplay_envs
from coplay.config import load_config
from coplay.driver.lineups import check_schedule, role_cycle
from coplay.driver.plans import iteration_plans
from coplay.learn.advantages import act_advantages
from coplay.rollout.model_episodes import RunnerContext, play_episodes
from coplay.types import Sample, Step, Trajectory
from tests.helpers import ScriptedEngine
from tests.rollout.test_model_episodes import first_legal

VERSIONS = {"act": 3, "retrieve": 3}
MIXED_POOL = ["rollout.opponents.current=0.25", "rollout.opponents.frozen=0.25",
              "rollout.opponents.expert=0.25", "rollout.opponents.random=0.25"]


def lineup_of(plan) -> tuple:
    """Who sits where (kind, adapter version) in a plan, the learner's seat included."""
    seats = coplay_envs.seats(plan.game)
    out = []
    for seat in seats:
        player = plan.players.get(seat, plan.default)
        out.append((seat, player.kind, player.seat.act if player.seat else None))
    return tuple(out)


def learner_role(plan) -> str:
    mine = [s for s in coplay_envs.seats(plan.game) if s not in plan.players]
    assert len(mine) == 1, f"{plan.episode_id}: pool mode seats the learner exactly once, got {mine}"
    return coplay_envs.seat_roles(plan.game, plan.seed)[mine[0]]


def test_every_episode_of_a_group_faces_the_same_lineup():
    cfg = load_config(overrides=["games=[avalon,diplomacy]", "rollout.group_size=4",
                                 "rollout.start_states=6", *MIXED_POOL])
    lineups_seen = set()
    for iteration in (1, 2, 3):
        plans = iteration_plans(cfg, iteration, VERSIONS, frozen_act=[1, 2], bank_version=0)
        groups = defaultdict(list)
        for plan in plans:
            groups[plan.group].append(plan)
        assert len(groups) == 2 * 6 and all(len(g) == 4 for g in groups.values())
        for members in groups.values():
            assert len({lineup_of(p) for p in members}) == 1, [lineup_of(p) for p in members]
            assert len({p.seed for p in members}) == 1
            lineups_seen.add(lineup_of(members[0]))
    kinds = {kind for lineup in lineups_seen for _, kind, _ in lineup}
    assert kinds == {"model", "current", "frozen", "expert", "random"}  # the pool still mixes across groups
    assert len(lineups_seen) > 20


@pytest.mark.parametrize("game,start_states", [("avalon", 4), ("diplomacy", 7)])
def test_each_role_gets_the_learner_seat_once_per_cycle(game, start_states):
    cfg = load_config(overrides=[f"games=[{game}]", "rollout.group_size=2",
                                 f"rollout.start_states={start_states}", *MIXED_POOL])
    for iteration in (1, 2, 3):
        plans = iteration_plans(cfg, iteration, VERSIONS, frozen_act=[1], bank_version=0)
        roles = Counter(learner_role(p) for p in plans)
        assert roles == dict.fromkeys(coplay_envs.role_ids(game), 2)  # G episodes per group, one group each


def test_a_weighted_schedule_gives_roles_their_share_and_the_seed_deals_them():
    cfg = load_config(overrides=["games=[avalon]", "rollout.group_size=1", "rollout.start_states=8",
                                 "rollout.selfplay.schedule={avalon: {merlin: 4, servant: 2, minion: 2, "
                                 "assassin: 0}}"])
    plans = iteration_plans(cfg, 5, VERSIONS, frozen_act=[], bank_version=0)
    assert Counter(learner_role(p) for p in plans) == {"merlin": 4, "servant": 2, "minion": 2}
    env = coplay_envs.make_env("avalon")
    for plan in plans:  # the deal the scheduler assumed is the one the env deals
        env.reset(seed=plan.seed)
        assert dict(zip(env.possible_agents, env.game.roles, strict=True)) == \
            coplay_envs.seat_roles("avalon", plan.seed)
    assert role_cycle({"a": 2, "b": 1}) == ["a", "b", "a"]


def test_schedule_errors_name_the_key():
    with pytest.raises(ValueError, match=r"rollout.selfplay.schedule.avalon: unknown role\(s\) \['oberon'\]"):
        check_schedule(load_config(overrides=["rollout.selfplay.schedule={avalon: {oberon: 1}}"]))
    with pytest.raises(ValueError, match="2048 is a single-player game"):
        check_schedule(load_config(overrides=["rollout.selfplay.schedule={'2048': {x: 1}}"]))


def test_full_self_play_seats_the_policy_everywhere_and_every_seat_trains(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    cfg = load_config(overrides=["games=[avalon,diplomacy]", "rollout.group_size=2", "rollout.start_states=1",
                                 "rollout.max_steps=8", "rollout.selfplay.mode=full"])
    plans = iteration_plans(cfg, 1, VERSIONS, frozen_act=[1], bank_version=0)
    assert all(not p.players and p.default.kind == "model" for p in plans)
    engine = ScriptedEngine(load_tokenizer(tiny_model_config), first_legal)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None)
    trajectories = asyncio.run(play_episodes(ctx, plans, 8))
    by_game = Counter(t.game for t in trajectories if t.policy == "model")
    assert by_game == {"avalon": 2 * 5, "diplomacy": 2 * 7}
    groups = {(t.group, t.seat) for t in trajectories}
    assert len(groups) == 5 + 7  # one group per seat: the G episodes of a seat are compared with each other
    act_groups = {s.group_id for t in trajectories for s in t.samples if s.adapter == "act"}
    assert act_groups <= {f"{g}/{seat}" for g, seat in groups}


def test_played_groups_keep_their_lineup_and_only_the_learner_seat_trains(tiny_model_config):
    from coplay.models.loading import load_tokenizer

    cfg = load_config(overrides=["games=[avalon]", "rollout.group_size=3", "rollout.start_states=4",
                                 "rollout.max_steps=8", *MIXED_POOL])
    plans = iteration_plans(cfg, 1, VERSIONS, frozen_act=[1], bank_version=0)
    engine = ScriptedEngine(load_tokenizer(tiny_model_config), first_legal)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None)
    trajectories = asyncio.run(play_episodes(ctx, plans, 12))
    seen = defaultdict(set)
    for t in trajectories:
        seen[(t.group, t.seat)].add((t.policy, t.role))
    assert all(len(v) == 1 for v in seen.values())  # same player and role in every episode of a group
    learners = Counter(t.role for t in trajectories if t.policy == "model")
    assert learners == dict.fromkeys(coplay_envs.role_ids("avalon"), 3)


def _traj(group: str, seat: str, role: str, reward: float, sid: str) -> Trajectory:
    sample = Sample("act", 1, [1], [2], [-0.1], group_id=group, reward=reward, sample_id=sid)
    step = Step(t=0, observation="", action="", reward=reward, score=0.0, sample_ids=[sid])
    return Trajectory(sid, "avalon", seat, role, seed=7, steps=[step], samples=[sample], group=group)


def test_advantages_are_normalised_per_seat_within_a_group():
    # one seed, two groups (line-ups), two servant seats: four separate groups of two
    trajs = [_traj(g, seat, "servant", r, f"{g}{seat}{i}")
             for g in ("A", "B") for seat in ("player_1", "player_3")
             for i, r in enumerate((1.0, -1.0) if seat == "player_1" else (5.0, 3.0))]
    adv = act_advantages(trajs)
    assert all(abs(abs(a) - 1.0) < 1e-5 for a in adv.values())  # pooled, the 5/3 seat would dwarf the other
    assert adv["Aplayer_30"] > 0 > adv["Aplayer_31"] and adv["Bplayer_10"] > 0


def test_metrics_count_the_learners_roles_and_diplomacy_press(tiny_model_config):
    from coplay.driver.metrics import learner_seats, negotiation
    from coplay.models.loading import load_tokenizer

    def press(request, prompt: str) -> str:
        if "NOW: negotiation" not in prompt:
            return "INTENTION: DEFEND hold\nORDERS:\n"
        return "INTENTION: EXECUTE talk\nORDERS:\nto FRANCE: let us ally\nto ALL: peace\nto ITALY: DMZ Tyr"

    cfg = load_config(overrides=["games=[diplomacy]", "rollout.group_size=1", "rollout.start_states=7",
                                 "rollout.max_steps=2", "rollout.opponents.current=0",
                                 "rollout.opponents.frozen=0", "rollout.opponents.random=0"])
    plans = iteration_plans(cfg, 1, VERSIONS, frozen_act=[], bank_version=0)
    engine = ScriptedEngine(load_tokenizer(tiny_model_config), press)
    ctx = RunnerContext(engine=engine, rules=coplay_envs.rules, skills_for=lambda game, role: None)
    trajectories = asyncio.run(play_episodes(ctx, plans, 8))
    centres = {t.role: t.score for t in trajectories if t.policy == "model"}
    assert learner_seats(trajectories) == {"diplomacy": {p: {"episodes": 1, "mean_score": centres[p],
                                                             "scores": [centres[p]]}
                                                         for p in coplay_envs.role_ids("diplomacy")}}
    counts = negotiation(trajectories)
    assert set(counts) == {"all", "expert", "model"}
    model = counts["model"]
    # 3 lines per power, but FRANCE's and ITALY's lines to themselves are not messages: 21 - 2, of them
    # 7 public
    assert model["negotiation_steps"] == 7 and model["messages"] == 19 and model["private"] == 12
    assert model["private_share"] == pytest.approx(12 / 19)
    assert counts["expert"]["messages"] > 0
