"""Teacher data for the cold-start SFT (docs/rewards.md): expert-bot episodes turned into `act` and `retrieve`
examples, labelled by the deterministic bank built from expert trajectories.

Each example is the exact prompt the decision agent would see (the one prompt builder of
`coplay.agent.prompts`, the same bounded history, the same skill rendering) and the completion the format
asks for: `act` from the bot's intention tag, one-line reason and action, with the skill of the step's
segment active; `retrieve` at each segment start, answering the segment's skill when the bank shows it among
the top k (else `SKILL: NONE`). The last step of a skill's segment, where the expert goes on with another
skill, answers `SKILL: SWITCH`, so the switch rule (and its reward penalty) is in use from the cold start.
An OpenAI-compatible teacher may answer the same `act` prompts instead (`openai_act_examples`). No torch,
no ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from coplay.agent.decision import derive_seed
from coplay.agent.openai_player import ChatClient, EndpointError, OpenAIEndpoint
from coplay.agent.parsing import ParsedAct, parse_act
from coplay.agent.prompts import MULTI_LINE_GAMES, ChatMessages, HistoryEntry, act_messages, retrieve_messages
from coplay.engines.base import SamplingParams
from coplay.rollout.bot_episodes import play_bot_episodes
from coplay.types import Trajectory


@dataclass(frozen=True)
class ChatExample:
    """One SFT example: chat messages (the prompt) and the assistant completion, for one adapter; for a
    teacher decision also its game, the action it chose and the step it was at (what the cold start balances
    `act` examples over, `coplay.learn.act_balance`), and the legal actions there (what an OpenAI teacher's
    answer is checked against: a `compact` prompt need not list them)."""

    adapter: str
    messages: ChatMessages
    completion: str
    game: str = ""
    action: str = ""
    step: int = 0
    legal: tuple[str, ...] = ()


def act_completion(game: str, intention: str, action: str, directive: str = "") -> str:
    """The `act` answer format for a teacher decision (`intention` is "<TAG> <reason>"; `directive` "",
    "KEEP" or "SWITCH" for the optional `SKILL:` line)."""
    key = "ORDERS:\n" if game in MULTI_LINE_GAMES else "ACTION: "
    skill = f"SKILL: {directive}\n" if directive else ""
    return f"INTENTION: {intention.strip()}\n{skill}{key}{action.strip()}"


SkillLabels = Callable[[Trajectory], tuple[Any, dict[int, str]]]
"""trajectory -> (a `SkillSource` for its bank or None, {segment start step: skill id or "NEW"})"""


def expert_examples(game: str, seeds: list[int], rules: str, history_len: int = 4,
                    max_steps: int | None = None, labels: SkillLabels | None = None, top_k: int = 3,
                    policy: str = "expert", skill_section: bool = True,
                    prompt_format: str = "full",
                    env_kwargs: dict[str, Any] | None = None) -> list[ChatExample]:
    """`act` (and, with `labels`, `retrieve`) examples from `policy` bots playing every seat, one episode
    per seed. `skill_section=False` (ablation variants without a bank): the `act` prompts have no skill
    section, as the decision agent's then have none. `prompt_format` (`rollout.prompt_format`) and
    `env_kwargs` (`game.<game>.env_kwargs`: the episode's length, what the text shows): the layout and the
    observations the served prompts have, so that the cold start trains on what the policy will be asked."""
    seen: dict[tuple[int, str], list[tuple[str, list[str]]]] = {}
    current = {"seed": 0}

    def hook(seat: str, observation: str, info: dict) -> None:
        seen.setdefault((current["seed"], seat), []).append(
            (str(observation), list(info.get("legal_actions", []))))

    examples: list[ChatExample] = []
    for seed in seeds:
        current["seed"] = seed
        for traj in play_bot_episodes(game, policy, [seed], max_steps=max_steps, hook=hook,
                                      env_kwargs=env_kwargs):
            skills, starts = labels(traj) if labels is not None else (None, {})
            active: str | None = None
            history: list[HistoryEntry] = []
            for step, (observation, legal) in zip(traj.steps, seen.get((seed, traj.seat), []), strict=False):
                if step.t in starts and skills is not None and len(skills):
                    label = starts[step.t]
                    shown = skills.candidates(step.features_before, observation, top_k)
                    text = "\n\n".join(f"[{sid}]\n{body}" for sid, body in shown)
                    active = label if label in {sid for sid, _ in shown} else None
                    examples.append(ChatExample("retrieve", retrieve_messages(game, observation, text),
                                                f"SKILL: {active or 'NONE'}", game=game, step=step.t))
                skill_text = skills.protocol_text(active) if (skills is not None and active) else None
                messages = act_messages(game, rules, observation, legal, skill_text,
                                        history[-history_len:] if history_len else [],
                                        skill_section=skill_section, prompt_format=prompt_format)
                next_label = starts.get(step.t + 1)
                switch = active is not None and next_label is not None and next_label != active
                examples.append(ChatExample("act", messages, act_completion(
                    game, step.intention, step.action, "SWITCH" if switch else ""), game=game,
                    action=step.action.strip(), step=step.t, legal=tuple(legal)))
                history.append(HistoryEntry(step.t, step.intention, step.action, step.reward))
    return examples


def bank_labels(banks: dict[str, Any], skill_bank_cfg: Any) -> SkillLabels:
    """Labels from the deterministic segmentation of each trajectory under its bank (by bank key)."""
    from coplay.agent.bank_view import BankSkills
    from coplay.skills.schema import bank_key_for
    from coplay.skills.update import segment_with_bank

    def label(traj: Trajectory) -> tuple[Any, dict[int, str]]:
        bank = banks.get(bank_key_for(traj.game, traj.seat, traj.role))
        if bank is None or not bank.skills or not traj.steps:
            return None, {}
        segments = segment_with_bank(bank, traj, skill_bank_cfg)
        return BankSkills(bank), {seg.start: seg.label for seg in segments}

    return label


# --------------------------------------------------------------- an OpenAI-compatible endpoint as the teacher

def legal_actions_shown(messages: ChatMessages) -> list[str] | None:
    """The legal actions a `full` `act` prompt lists (the inverse of the prompt builder's legal block); []
    when the prompt defers to the observation (every `compact` prompt: read `ChatExample.legal` instead),
    None when the list was cut short (legality cannot be checked)."""
    user = messages[-1]["content"]
    _, found, rest = user.partition("\n\nLegal actions:\n")
    if not found:
        return []
    block = rest.split("\n\n", 1)[0].splitlines()
    return None if block and block[-1].startswith("... and ") else block


def _teacher_completion(game: str, parsed: ParsedAct) -> str:
    """A parsed teacher answer in the canonical `act` format (canonical legal action)."""
    return act_completion(game, parsed.intention, parsed.action, parsed.skill_directive)


async def _ask_endpoint(game: str, prompts: list[ChatMessages], endpoint: OpenAIEndpoint,
                        sampling: SamplingParams, concurrency: int) -> list[str | None]:
    """The endpoint's answer to each prompt (None where the request failed), at most `concurrency` in
    flight."""
    client = ChatClient(endpoint)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def ask(i: int, messages: ChatMessages) -> str | None:
        async with gate:
            try:
                return await client.complete(messages, sampling, seed=derive_seed("teacher", game, i))
            except EndpointError:
                return None

    try:
        return list(await asyncio.gather(*(ask(i, m) for i, m in enumerate(prompts))))
    finally:
        await client.aclose()


def openai_act_examples(game: str, examples: list[ChatExample], endpoint: OpenAIEndpoint,
                        sampling: SamplingParams,
                        concurrency: int = 8) -> tuple[list[ChatExample], dict[str, int]]:
    """The same prompts answered by an OpenAI-compatible teacher: each `act` example of `game` gets the
    endpoint's answer, rewritten in the canonical `act` format; an answer with any parse error (missing or
    unknown INTENTION tag, no ACTION, an illegal action) is dropped, and so is a prompt the endpoint failed.
    Other adapters' examples pass through unchanged. Returns (examples, counts: prompts, kept,
    dropped_unparseable, endpoint_errors). Call it from synchronous code."""
    act = [e for e in examples if e.adapter == "act"]
    answers = asyncio.run(_ask_endpoint(game, [e.messages for e in act], endpoint, sampling, concurrency))
    kept: list[ChatExample] = []
    counts = {"prompts": len(act), "kept": 0, "dropped_unparseable": 0, "endpoint_errors": 0}
    for example, answer in zip(act, answers, strict=True):
        legal = list(example.legal)
        if answer is None:
            counts["endpoint_errors"] += 1
            continue
        parsed = parse_act(answer, legal, multi_line=game in MULTI_LINE_GAMES)
        if parsed.error or not parsed.action:
            counts["dropped_unparseable"] += 1
            continue
        kept.append(replace(example, completion=_teacher_completion(game, parsed),
                            action=parsed.action.strip()))
    counts["kept"] = len(kept)
    return kept + [e for e in examples if e.adapter != "act"], counts
