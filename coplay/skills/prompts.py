"""Prompts of the skill-bank adapters (`segment`, `contract`, `curator`) and tolerant parsers of their
answers.

Parsers accept what a model plausibly writes (extra prose, code fences, case) but never guess: an answer that
does not contain a parseable, valid reply returns None / raises `AnswerError`, and the caller counts it.
Standard library only; never imports ray or torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from coplay.skills.caller import ChatMessages
from coplay.skills.expressions import ExpressionError, parse_expression
from coplay.skills.literals import LiteralError, parse_literal
from coplay.skills.schema import Skill

MAX_SUMMARY_CHARS = 300
MAX_PLAN_STEP_CHARS = 200
MAX_SHOWN_ACTIONS = 6


class AnswerError(ValueError):
    """A model answer that does not parse or validate; the message says which part and why."""


def render_skill(skill: Skill) -> str:
    """A skill as prompts show it (retrieval, segment, curator)."""
    lines = [f"[{skill.id}] {skill.name}: {skill.summary}",
             f"  contract: {', '.join(skill.contract.literals) or '(none)'}",
             f"  preconditions: {skill.preconditions} | success: {skill.success} | abort: {skill.abort}",
             "  plan: " + " / ".join(skill.plan)]
    if skill.stats.uses:
        lines.append(f"  pass rate {skill.stats.pass_rate:.0%} over {skill.stats.uses} uses, "
                     f"about {skill.stats.mean_duration:.0f} steps")
    return "\n".join(lines)


def segment_prompt(game: str, tags: Mapping[str, int], actions: Sequence[str], effects: Iterable[str],
                   reward: float, length: int, candidates: Sequence[Skill],
                   order: Sequence[str] | None = None) -> ChatMessages:
    """Ask which candidate skill (or NEW) explains a segment. `order` lists the ids to rank (NEW included)
    in the deterministic score order; default: the candidates, then NEW."""
    shown = [a.replace("\n", " ")[:60] for a in actions[:MAX_SHOWN_ACTIONS]]
    more = f" ... ({len(actions) - len(shown)} more)" if len(actions) > len(shown) else ""
    cands = "\n".join(render_skill(s) for s in candidates)
    ids = ", ".join(order if order is not None else [s.id for s in candidates] + ["NEW"])
    tag_text = ", ".join(f"{t or 'NONE'} x{c}" for t, c in sorted(tags.items()))
    system = ("You label segments of game trajectories with the skill that best explains them. Rank the "
              "candidates from best to worst on one line: RANK: <id> > <id> > ... Use NEW for 'none of "
              "these'.")
    user = (f"Game: {game}\nSegment of {length} steps, game reward {reward:g}.\n"
            f"Intentions: {tag_text}\n"
            f"Actions: {'; '.join(shown)}{more}\n"
            f"Effects (start -> end): {', '.join(sorted(effects)) or '(none)'}\n\nCandidates:\n{cands}\n"
            f"NEW: a behaviour no candidate describes.\n\nRank these ids: {ids}")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_ranking(text: str, labels: Sequence[str]) -> list[str] | None:
    """Labels in the order the answer names them (after `RANK:` when present); None when it names none."""
    match = re.search(r"rank\s*:(.*)", text, flags=re.IGNORECASE | re.DOTALL)
    body = match.group(1) if match else text
    by_lower = {label.lower(): label for label in labels}
    found: list[str] = []
    for word in re.findall(r"[A-Za-z0-9_]+", body):
        label = by_lower.get(word.lower())
        if label is not None and label not in found:
            found.append(label)
    return found or None


def contract_prompt(game: str, tag: str, n_instances: int, frequencies: Mapping[str, float],
                    feature_kinds: Mapping[str, str], mean_start: Mapping[str, float | bool],
                    duration: float) -> ChatMessages:
    """Ask for a skill's protocol as JSON."""
    freq_text = ", ".join(f"{lit} {f:.0%}"
                          for lit, f in sorted(frequencies.items(), key=lambda x: (-x[1], x[0]))[:14])
    feats = ", ".join(f"{n} ({k})" for n, k in sorted(feature_kinds.items()))
    start = ", ".join(f"{n}={_fmt(v)}" for n, v in sorted(mean_start.items()))
    system = ("You write the protocol of one skill of a game-playing agent. Answer with a first line "
              "EFFECTS: <contract literals separated by commas: f↑, f↓, b=true, b=false>, then one JSON "
              'object with keys "summary" (one sentence), "plan" (2 to 7 short steps), "preconditions", '
              '"success" and "abort" (validator expressions over the features: comparisons < <= > >= == !=, '
              "and, or, not, numbers, true, false, feature names).")
    user = (f"Game: {game}\nIntention tag: {tag or 'NONE'}\nInstances: {n_instances}, "
            f"about {duration:.0f} steps each.\n"
            f"Effects seen (share of instances): {freq_text or '(none)'}\nTypical start: {start}\n"
            f"Features: {feats}\n\nThe EFFECTS line, then the JSON:")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _fmt(value: float | bool) -> str:
    return str(value).lower() if isinstance(value, bool) else f"{float(value):.3g}"


def _json_object(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise AnswerError("no JSON object in the answer")
    depth, in_string, escaped = 0, False, False
    for pos in range(start, len(text)):
        ch = text[pos]
        if in_string:
            escaped = (ch == "\\") and not escaped
            if ch == '"' and not escaped:
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                try:
                    value = json.loads(text[start:pos + 1])
                except json.JSONDecodeError as exc:
                    raise AnswerError(f"JSON does not parse: {exc}") from None
                if not isinstance(value, dict):
                    raise AnswerError("JSON is not an object")
                return value
    raise AnswerError("JSON object is not closed")


def parse_protocol(text: str, features: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """(protocol, proposed effects) from a `contract` answer, or `AnswerError` naming what is wrong.
    The protocol (the JSON object) must be complete and valid; effects are optional (`read_effects`) and
    unparseable ones are kept as text (they simply do not match any literal when scored)."""
    data = _json_object(text)
    known = set(features)
    summary = data.get("summary")
    if not isinstance(summary, str) or not summary.strip() or len(summary) > MAX_SUMMARY_CHARS:
        raise AnswerError(f"summary must be a non-empty string of at most {MAX_SUMMARY_CHARS} characters")
    plan = data.get("plan")
    if (not isinstance(plan, list) or not 2 <= len(plan) <= 7
            or not all(isinstance(p, str) and p.strip() and len(p) <= MAX_PLAN_STEP_CHARS for p in plan)):
        raise AnswerError("plan must be a list of 2 to 7 non-empty short strings")
    protocol: dict[str, Any] = {"summary": summary.strip(), "plan": [p.strip() for p in plan]}
    for key in ("preconditions", "success", "abort"):
        value = data.get(key)
        if not isinstance(value, str):
            raise AnswerError(f"{key} must be a string expression")
        try:
            protocol[key] = parse_expression(value, known).text
        except ExpressionError as exc:
            raise AnswerError(f"{key}: {exc}") from None
    line = _effects_line(text, known)
    return protocol, line if line is not None else _effects(data.get("effects", []), known)


def _effects(items: Any, known: set[str]) -> list[str]:
    """Canonical literals of an `effects` list; unparseable items stay as text (they match no literal)."""
    effects: list[str] = []
    for item in items if isinstance(items, list) else []:
        try:
            parsed = parse_literal(item)
            effects.append(str(parsed) if parsed.feature in known else str(item))
        except LiteralError:
            effects.append(str(item))
    return sorted(set(effects))


_EFFECTS_LINE = re.compile(r"^[\s*`]*effects\s*:([^\n{]*)", re.IGNORECASE | re.MULTILINE)
_EFFECTS_LIST = re.compile(r'"effects"\s*:\s*(\[[^\[\]]*\])')


def _effects_line(text: str, known: set[str]) -> list[str] | None:
    """The items of the first `EFFECTS: a, b, ...` line (`(none)` or nothing: an empty list); None without
    one."""
    match = _EFFECTS_LINE.search(text)
    if match is None:
        return None
    items = [item.strip().strip("\"'`.") for item in match[1].split(",")]
    return _effects([item for item in items if item and item.lower() != "(none)"], known)


def read_effects(text: str, features: Iterable[str]) -> list[str] | None:
    """The effect literals a `contract` answer states, for its F1 reward even when the protocol after them
    does not validate (or was cut off at the token limit): the items of the `EFFECTS:` line (each item a
    literal or kept as text that matches none), else an `effects` list inside the JSON object, else the first
    complete `"effects": [...]` list in the text. None when the answer states no effects at all."""
    known = set(features)
    line = _effects_line(text, known)
    if line is not None:
        return line
    try:
        data = _json_object(text)
    except AnswerError:
        match = _EFFECTS_LIST.search(text)
        if match is None:
            return None
        try:
            items = json.loads(match[1])
        except ValueError:
            return None
        return _effects(items, known)
    return _effects(data["effects"], known) if "effects" in data else None


def curator_prompt(game: str, op: str, skills: Sequence[Skill], evidence: Mapping[str, Any],
                   proposed: Sequence[Skill]) -> ChatMessages:
    """Ask to approve or reject one maintenance operation."""
    before = "\n".join(render_skill(s) for s in skills) or "(none)"
    after = "\n".join(render_skill(s) for s in proposed) or "(removed)"
    system = ("You curate the skill bank of a game-playing agent. Approve an operation only if the bank "
              "gets more accurate and more useful. Answer on the first line: VERDICT: APPROVE or "
              "VERDICT: REJECT.")
    user = (f"Game: {game}\nOperation: {op}\nSkills now:\n{before}\nAfter the operation:\n{after}\n"
            f"Evidence: {json.dumps(evidence, sort_keys=True, default=str, ensure_ascii=False)[:1500]}"
            f"\n\nVERDICT:")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_verdict(text: str) -> str | None:
    """"approve", "reject", or None when the answer says neither or both."""
    match = re.search(r"verdict\s*:\s*\**\s*([A-Za-z]+)", text, flags=re.IGNORECASE)
    if match:
        word = match.group(1).lower()
        if word in ("approve", "approved", "accept", "yes"):
            return "approve"
        if word in ("reject", "rejected", "deny", "no"):
            return "reject"
        return None
    approve = re.search(r"\b(approve|approved|accept)\b", text, flags=re.IGNORECASE)
    reject = re.search(r"\b(reject|rejected|deny)\b", text, flags=re.IGNORECASE)
    if approve and not reject:
        return "approve"
    if reject and not approve:
        return "reject"
    return None
