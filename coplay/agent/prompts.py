"""The one prompt builder for training, evaluation and play (docs/agents.md).

An `act` prompt shows the game's rules in brief, the full observation, the legal actions, the active
skill's protocol (if any), a bounded history of this seat's recent steps, and the answer format. A
`retrieve` prompt shows the observation and the bank's top-k skills. Prompts go through the model's chat
template (with `enable_thinking` as `model.enable_thinking` sets it: Qwen3's template reads it, others
ignore it); when a prompt would not fit the context, the history is shortened first, then the list of legal
actions, and a prompt that still does not fit raises `PromptTooLong` (the runner counts it and the game
applies its fallback). Each shortening is reported, so the runner counts it too. Other prompts (the skill
bank's) are fitted by `fit_messages`: the system turn (rules, answer format) stays whole and the middle of
the last user turn is cut. No torch, no ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coplay.agent.parsing import INTENTION_TAGS

ChatMessages = list[dict[str, str]]

SKILL_FORMAT_LINE = "SKILL: KEEP or SWITCH   (only when a skill is active)\n"
ACT_FORMAT = (
    "Answer in exactly this format:\n"
    "INTENTION: <TAG> <your subgoal in a few words>\n"
    f"{SKILL_FORMAT_LINE}"
    "ACTION: <one legal action>\n"
    f"TAG is one of: {' '.join(INTENTION_TAGS)}."
)
ORDERS_FORMAT = (
    "Answer in exactly this format:\n"
    "INTENTION: <TAG> <your subgoal in a few words>\n"
    f"{SKILL_FORMAT_LINE}"
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
                 history: list[HistoryEntry], legal_limit: int | None = None,
                 skill_section: bool = True) -> ChatMessages:
    """The `act` prompt as chat messages. `skill_section=False` (ablation variants without a bank): neither
    the "Active skill" block nor the format's `SKILL:` line appear, so the prompt says nothing of skills."""
    fmt = ORDERS_FORMAT if game in MULTI_LINE_GAMES else ACT_FORMAT
    if not skill_section:
        fmt = fmt.replace(SKILL_FORMAT_LINE, "")
    system = f"You are an expert player of the game {game}.\nRules:\n{rules.strip()}\n\n{fmt}"
    skill = f"Active skill:\n{skill_text.strip()}" if skill_text else "Active skill: none."
    user = "\n\n".join([f"Observation:\n{observation.rstrip()}", _legal_text(legal_actions, legal_limit),
                        *([skill] if skill_section else []), _history_text(history), "Your answer:"])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def retrieve_messages(game: str, observation: str, skills_text: str) -> ChatMessages:
    """The `retrieve` prompt: choose one of the shown skills, or none."""
    system = f"You choose which skill to follow next in the game {game}.\n{RETRIEVE_FORMAT}"
    user = f"Observation:\n{observation.rstrip()}\n\nCandidate skills:\n{skills_text.strip()}\n\nYour answer:"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def template_kwargs(tokenizer: Any) -> dict[str, Any]:
    """Extra variables for the chat template: `enable_thinking` (default False) as `load_tokenizer` set it
    from `model.enable_thinking`. Templates that do not use a variable ignore it."""
    return {"enable_thinking": bool(getattr(tokenizer, "coplay_enable_thinking", False))}


def encode(tokenizer: Any, messages: ChatMessages) -> list[int]:
    """Chat template -> token ids, with the assistant turn opened."""
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        **template_kwargs(tokenizer))
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return list(ids)


def fit_messages(tokenizer: Any, messages: ChatMessages, budget: int) -> tuple[ChatMessages, list[int], int]:
    """(messages, ids, tokens cut): the prompt within `budget` tokens. The system turn stays whole (it holds
    the task and the answer format); the middle of the last non-system turn is replaced by a marker, keeping
    its head and its tail (which asks for the answer). `PromptTooLong` when even that cannot fit."""
    ids = encode(tokenizer, messages)
    if len(ids) <= budget:
        return messages, ids, 0
    index = max((i for i, m in enumerate(messages) if m["role"] != "system"), default=None)
    if index is None:
        raise PromptTooLong(f"a system-only prompt of {len(ids)} tokens exceeds the budget of {budget}")
    content = tokenizer.encode(messages[index]["content"], add_special_tokens=False)
    cut = len(ids) - budget
    for _ in range(4):  # re-encoding after the cut can merge tokens differently: a few passes settle it
        keep = len(content) - cut - 16  # room for the marker
        if keep < 16:
            break
        head = keep // 3
        text = (tokenizer.decode(content[:head]) + f"\n[... {cut} tokens cut ...]\n"
                + tokenizer.decode(content[len(content) - (keep - head):]))
        fitted = [*messages[:index], {**messages[index], "content": text}, *messages[index + 1:]]
        fitted_ids = encode(tokenizer, fitted)
        if len(fitted_ids) <= budget:
            return fitted, fitted_ids, len(ids) - len(fitted_ids)
        cut += len(fitted_ids) - budget
    raise PromptTooLong(f"the prompt needs {len(ids)} tokens and its system turn alone does not leave room "
                        f"for the rest within {budget}")


def build_act_prompt(tokenizer: Any, budget: int, game: str, rules: str, observation: str,
                     legal_actions: list[str], skill_text: str | None, history: list[HistoryEntry],
                     skill_section: bool = True) -> tuple[ChatMessages, list[int], tuple[str, ...]]:
    """Messages, token ids and the trims applied (`history`, `legal`: none when it fits) of the `act`
    prompt within `budget` tokens (see module docstring; `skill_section` as in `act_messages`)."""
    attempts: list[tuple[list[HistoryEntry], int | None]] = [(history, None)]
    attempts += [(history[-n:] if n else [], None) for n in range(len(history) - 1, -1, -1)]
    attempts += [([], limit) for limit in (64, 16, 4)]
    for hist, limit in attempts:
        messages = act_messages(game, rules, observation, legal_actions, skill_text, hist, limit,
                                skill_section)
        ids = encode(tokenizer, messages)
        if len(ids) <= budget:
            trims = (("history",) if len(hist) < len(history) else ()) + \
                (("legal",) if limit is not None and limit < len(legal_actions) else ())
            return messages, ids, trims
    raise PromptTooLong(f"{game}: the act prompt needs {len(ids)} tokens even without history and with "
                        f"4 legal actions shown; the budget is {budget} (engine.max_model_len - max_tokens)")


def build_retrieve_prompt(tokenizer: Any, budget: int, game: str, observation: str,
                          skills_text: str) -> tuple[ChatMessages, list[int]]:
    messages = retrieve_messages(game, observation, skills_text)
    ids = encode(tokenizer, messages)
    if len(ids) > budget:
        raise PromptTooLong(f"{game}: the retrieve prompt needs {len(ids)} tokens; the budget is {budget}")
    return messages, ids
