"""The one prompt builder for training, evaluation and play (docs/agents.md).

An `act` prompt shows the game's rules in brief, the full observation, the legal actions, the active
skill's protocol (if any), a bounded history of this seat's recent steps, and the answer format. A
`retrieve` prompt shows the observation and the bank's top-k skills. Prompts go through the model's chat
template; when a prompt would not fit the context, the history is shortened first, then the list of legal
actions, and a prompt that still does not fit raises `PromptTooLong` (the runner counts it and the game
applies its fallback). No torch, no ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coplay.agent.parsing import INTENTION_TAGS

ChatMessages = list[dict[str, str]]

ACT_FORMAT = (
    "Answer in exactly this format:\n"
    "INTENTION: <TAG> <your subgoal in a few words>\n"
    "SKILL: KEEP or SWITCH   (only when a skill is active)\n"
    "ACTION: <one legal action>\n"
    f"TAG is one of: {' '.join(INTENTION_TAGS)}."
)
ORDERS_FORMAT = (
    "Answer in exactly this format:\n"
    "INTENTION: <TAG> <your subgoal in a few words>\n"
    "SKILL: KEEP or SWITCH   (only when a skill is active)\n"
    "ORDERS:\n<one order per line, or message lines 'to POWER: <text>' / 'to ALL: <text>' when negotiating>\n"
    f"TAG is one of: {' '.join(INTENTION_TAGS)}."
)
RETRIEVE_FORMAT = "Answer with one line: SKILL: <id of the skill to follow> or SKILL: NONE"
MULTI_LINE_GAMES = frozenset({"diplomacy"})


class PromptTooLong(ValueError):
    """Even the shortest form of the prompt exceeds the context budget."""


@dataclass(frozen=True)
class HistoryEntry:
    """One earlier step of this seat, as the prompt shows it."""

    t: int
    intention: str
    action: str
    reward: float


def _history_text(history: list[HistoryEntry]) -> str:
    if not history:
        return "Recent steps: none yet."
    lines = [f"t={h.t}: {h.intention or '-'} | action: {h.action.replace(chr(10), '; ')} | "
             f"reward {h.reward:g}" for h in history]
    return "Recent steps (oldest first):\n" + "\n".join(lines)


def _legal_text(legal_actions: list[str], limit: int | None) -> str:
    if not legal_actions:
        return "Legal actions: see the observation."
    shown = legal_actions if limit is None else legal_actions[:limit]
    more = len(legal_actions) - len(shown)
    tail = f"\n... and {more} more legal actions of the same forms" if more > 0 else ""
    return "Legal actions:\n" + "\n".join(shown) + tail


def act_messages(game: str, rules: str, observation: str, legal_actions: list[str], skill_text: str | None,
                 history: list[HistoryEntry], legal_limit: int | None = None) -> ChatMessages:
    """The `act` prompt as chat messages."""
    fmt = ORDERS_FORMAT if game in MULTI_LINE_GAMES else ACT_FORMAT
    system = f"You are an expert player of the game {game}.\nRules:\n{rules.strip()}\n\n{fmt}"
    skill = f"Active skill:\n{skill_text.strip()}" if skill_text else "Active skill: none."
    user = "\n\n".join([f"Observation:\n{observation.rstrip()}", _legal_text(legal_actions, legal_limit),
                        skill, _history_text(history), "Your answer:"])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def retrieve_messages(game: str, observation: str, skills_text: str) -> ChatMessages:
    """The `retrieve` prompt: choose one of the shown skills, or none."""
    system = f"You choose which skill to follow next in the game {game}.\n{RETRIEVE_FORMAT}"
    user = f"Observation:\n{observation.rstrip()}\n\nCandidate skills:\n{skills_text.strip()}\n\nYour answer:"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def encode(tokenizer: Any, messages: ChatMessages) -> list[int]:
    """Chat template -> token ids, with the assistant turn opened."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return list(ids)


def build_act_prompt(tokenizer: Any, budget: int, game: str, rules: str, observation: str,
                     legal_actions: list[str], skill_text: str | None,
                     history: list[HistoryEntry]) -> tuple[ChatMessages, list[int]]:
    """Messages and token ids of the `act` prompt within `budget` tokens (see module docstring)."""
    attempts: list[tuple[list[HistoryEntry], int | None]] = [(history, None)]
    attempts += [(history[-n:] if n else [], None) for n in range(len(history) - 1, -1, -1)]
    attempts += [([], limit) for limit in (64, 16, 4)]
    for hist, limit in attempts:
        messages = act_messages(game, rules, observation, legal_actions, skill_text, hist, limit)
        ids = encode(tokenizer, messages)
        if len(ids) <= budget:
            return messages, ids
    raise PromptTooLong(f"{game}: the act prompt needs {len(ids)} tokens even without history and with "
                        f"4 legal actions shown; the budget is {budget} (engine.max_model_len - max_tokens)")


def build_retrieve_prompt(tokenizer: Any, budget: int, game: str, observation: str,
                          skills_text: str) -> tuple[ChatMessages, list[int]]:
    messages = retrieve_messages(game, observation, skills_text)
    ids = encode(tokenizer, messages)
    if len(ids) > budget:
        raise PromptTooLong(f"{game}: the retrieve prompt needs {len(ids)} tokens; the budget is {budget}")
    return messages, ids
