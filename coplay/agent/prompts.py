"""The one prompt builder for training, evaluation and play (docs/agents.md).

An `act` prompt shows the game's rules in brief, the full observation, the legal actions, the active
skill's protocol (if any), a bounded history of this seat's recent steps, and the answer format. A
`retrieve` prompt shows the observation and the bank's top-k skills. Prompts go through the model's chat
template (with `enable_thinking` as `model.enable_thinking` sets it: Qwen3's template reads it, others
ignore it); when a prompt would not fit the context, the history is shortened first, then the list of legal
actions, and a prompt that still does not fit raises `PromptTooLong` (the runner counts it and the game
applies its fallback). Each shortening is reported, so the runner counts it too. Other prompts (the skill
bank's) are fitted by `fit_messages`: the system turn (rules, answer format) stays whole and the middle of
the last user turn is cut.

Two layouts of the `act` prompt (`rollout.prompt_format`, docs/agents.md): `full`, the one above, and
`compact`, which says each thing once: the rules in the system turn only (the observation's closing
`Your move:` line, which restates the rules or the legal moves, is left out), the legal actions once (where
the observation already lists them, on one line or one line per unit, the prompt refers to it; otherwise
one line, actions that differ only in their last word joined as `head a|b|c`), no "Active skill: none."
and no history section when there is no history. The system turn and the answer format are the same in
both, so `coplay.agent.parsing` reads the answers of either. No torch, no ray.
"""

from __future__ import annotations

import re
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
PROMPT_FORMATS = ("full", "compact")
YOUR_MOVE = "Your move:"
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


_DELIMITED = r"(?<![^\s:,|;]){}(?![^\s,|;.:])"  # an item of a list: delimited by spaces or , ; | : .
_GROUP_SEPARATORS = ("|", ";", "\n")  # an action holding one of these is listed whole, one per line


def listing_lines(observation: str, legal_actions: list[str]) -> list[str]:
    """The observation lines that list the (non-empty) legal actions, each action a delimited item: the one
    line that holds them all where there is one (2048's `Legal moves:`), else every line that holds two or
    more of them, if together they hold each one (Diplomacy's orders, one line per unit); [] otherwise.
    Where there are such lines, a compact prompt refers to them instead of listing the actions again."""
    wanted = [re.compile(_DELIMITED.format(re.escape(a))) for a in dict.fromkeys(legal_actions) if a]
    if not wanted:
        return []
    lines = observation.splitlines()
    held = [[w.search(line) is not None for w in wanted] for line in lines]
    whole = next((line for line, h in zip(lines, held, strict=True) if all(h)), None)
    if whole is not None:
        return [whole]
    lists = [(line, h) for line, h in zip(lines, held, strict=True) if sum(h) >= 2]
    covered = all(any(h[i] for _, h in lists) for i in range(len(wanted)))
    return [line for line, _ in lists] if lists and covered else []


def _compact_list(legal_actions: list[str], limit: int | None) -> str:
    """One line: actions that differ only in their last word share their head (`place J rot 0 col 0|1|2`);
    the empty action (Diplomacy: send nothing) is not listed. Cut to `limit` actions when set."""
    actions = [a for a in legal_actions if a]
    shown = actions if limit is None else actions[:limit]
    more = len(actions) - len(shown)
    tail = f" ... and {more} more of the same forms" if more > 0 else ""
    if any(sep in a for a in shown for sep in _GROUP_SEPARATORS):
        return f"Legal actions ({len(actions)}):\n" + "\n".join(shown) + tail
    runs: list[tuple[str, list[str]]] = []  # consecutive actions with the same head, in the given order
    for action in shown:
        head, _, last = action.rpartition(" ")
        if head and runs and runs[-1][0] == head:
            runs[-1][1].append(last)
        else:
            runs.append((head, [last]) if head else (action, []))
    items = [f"{head} {'|'.join(lasts)}" if lasts else head for head, lasts in runs]
    key = "; a|b = a or b" if len(items) < len(shown) else ""
    return f"Legal actions ({len(actions)}{key}): " + "; ".join(items) + tail


def _compact_user_turn(observation: str, legal_actions: list[str], skill_text: str | None,
                       history: list[HistoryEntry], legal_limit: int | None, skill_section: bool) -> str:
    """The `compact` user turn (module docstring): each fact once, no filler lines."""
    listing = listing_lines(observation, legal_actions)
    kept = [line for line in observation.rstrip().splitlines()
            if line in listing or not line.startswith(YOUR_MOVE)]
    parts = ["Observation:\n" + "\n".join(kept)]
    if listing:
        head = listing[0].split(":", 1)[0].strip()
        named = len(listing) == 1 and ":" in listing[0] and len(head) <= 40
        where = f'"{head}" above' if named else "the observation"
        parts.append(f"Legal actions: see {where}.")
    elif any(legal_actions):
        parts.append(_compact_list(legal_actions, legal_limit))
    if skill_section and skill_text:
        parts.append(f"Active skill:\n{skill_text.strip()}")
    if history:
        parts.append(_history_text(history))
    return "\n\n".join([*parts, "Your answer:"])


def act_messages(game: str, rules: str, observation: str, legal_actions: list[str], skill_text: str | None,
                 history: list[HistoryEntry], legal_limit: int | None = None,
                 skill_section: bool = True, prompt_format: str = "full") -> ChatMessages:
    """The `act` prompt as chat messages. `skill_section=False` (ablation variants without a bank): neither
    the "Active skill" block nor the format's `SKILL:` line appear, so the prompt says nothing of skills.
    `prompt_format`: `full` or `compact` (module docstring); the system turn is the same in both."""
    if prompt_format not in PROMPT_FORMATS:
        raise ValueError(f"prompt format {prompt_format!r}: expected one of {list(PROMPT_FORMATS)}")
    fmt = ORDERS_FORMAT if game in MULTI_LINE_GAMES else ACT_FORMAT
    if not skill_section:
        fmt = fmt.replace(SKILL_FORMAT_LINE, "")
    system = f"You are an expert player of the game {game}.\nRules:\n{rules.strip()}\n\n{fmt}"
    if prompt_format == "compact":
        user = _compact_user_turn(observation, legal_actions, skill_text, history, legal_limit, skill_section)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]
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
                     skill_section: bool = True,
                     prompt_format: str = "full") -> tuple[ChatMessages, list[int], tuple[str, ...]]:
    """Messages, token ids and the trims applied (`history`, `legal`: none when it fits) of the `act`
    prompt within `budget` tokens (see module docstring; `skill_section`, `prompt_format` as in
    `act_messages`)."""
    attempts: list[tuple[list[HistoryEntry], int | None]] = [(history, None)]
    attempts += [(history[-n:] if n else [], None) for n in range(len(history) - 1, -1, -1)]
    attempts += [([], limit) for limit in (64, 16, 4)]
    for hist, limit in attempts:
        messages = act_messages(game, rules, observation, legal_actions, skill_text, hist, limit,
                                skill_section, prompt_format)
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
