"""Tolerant parsing of `act` and `retrieve` completions, exact about legality.

`act` completions (docs/agents.md):

    INTENTION: <TAG> <subgoal>
    SKILL: KEEP|SWITCH          (optional)
    ACTION: <action>            (Diplomacy: `ORDERS:` then one order per line)

Tolerated: any letter case in the headers, markdown emphasis and bullets, numbering (`1. `), quotes and
backticks, extra spaces (also inside `swap (1, 2) (1,3)`). Not tolerated: an action that is not legal. Such
an action is passed on unchanged so the game applies its documented fallback, and the parse records why.
Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INTENTION_TAGS = ("SETUP", "CLEAR", "MERGE", "ATTACK", "DEFEND", "NAVIGATE", "POSITION", "COLLECT", "BUILD",
                  "SURVIVE", "OPTIMIZE", "EXPLORE", "EXECUTE")
TEMPLATE_SLOT = "<text>"
_HEADER = re.compile(
    r"^\s*(?:[-*>#]+\s*|\d+[.)]\s*)?\**\s*(intention|skill|action|orders)\s*\**\s*:\s*\**\s*(.*)$",
    re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_QUOTES = "\"'`“”‘’"


@dataclass(frozen=True)
class ParsedAct:
    """What an `act` completion said. `action` is what goes to the game (canonical when legal);
    `error` is empty when everything parsed and the action is legal."""

    tag: str
    subgoal: str
    skill_directive: str  # "", "KEEP" or "SWITCH"
    action: str
    error: str

    @property
    def intention(self) -> str:
        return f"{self.tag} {self.subgoal}".strip()


def normalize(text: str) -> str:
    """The comparison key of an action: lower case, no quotes, single spaces, no spaces around , ( )."""
    text = text.strip().strip(_QUOTES + ". ").lower()
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\s*([,()])\s*", r"\1", text).replace(")(", ") (")


def _clean_line(line: str) -> str:
    return _BULLET.sub("", line.strip().replace("**", "")).strip().strip(_QUOTES + " ")


def _sections(text: str) -> dict[str, list[str]]:
    """Header -> lines (the header's own remainder first). The first occurrence of a header wins."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for raw in text.splitlines():
        match = _HEADER.match(raw)
        if match:
            key = match[1].lower()
            key = "action" if key == "orders" else key
            current = None if key in sections else key
            if current is not None:
                sections[current] = [match[2]]
            continue
        if current is not None:
            sections[current].append(raw)
    return sections


def match_legal(candidate: str, legal_actions: list[str]) -> str | None:
    """The canonical legal action `candidate` denotes, or None. Template entries (`say <text>`) match any
    candidate that starts with their fixed part; the free text is kept as written."""
    key = normalize(candidate)
    if not key:
        return None
    for legal in legal_actions:
        if TEMPLATE_SLOT in legal:
            prefix = legal.split(TEMPLATE_SLOT, 1)[0]
            if key.startswith(normalize(prefix)) and normalize(prefix):
                free = candidate.strip().strip(_QUOTES)[len(prefix.rstrip()):].strip()
                return prefix + free
        elif normalize(legal) == key:
            return legal
    return None


def parse_act(text: str, legal_actions: list[str], multi_line: bool = False) -> ParsedAct:
    """Parse an `act` completion. `multi_line`: the action is every line of the ACTION/ORDERS block
    (Diplomacy orders or messages), each checked by the game itself."""
    sections = _sections(text or "")
    errors: list[str] = []
    tag, subgoal = "", ""
    intention = " ".join(s.strip() for s in sections.get("intention", [])[:1]).strip()
    if intention:
        first, _, rest = _clean_line(intention).partition(" ")
        if first.upper().strip(":") in INTENTION_TAGS:
            tag, subgoal = first.upper().strip(":"), rest.strip()
        else:
            errors.append(f"intention tag {first!r} is not one of the {len(INTENTION_TAGS)} tags")
            subgoal = _clean_line(intention)
    else:
        errors.append("no INTENTION line")
    directive = ""
    skill = " ".join(sections.get("skill", [])[:1]).strip().strip(_QUOTES).upper()
    if skill:
        if skill.split()[0] in ("KEEP", "SWITCH"):
            directive = skill.split()[0]
        else:
            errors.append(f"SKILL directive {skill!r} is not KEEP or SWITCH")
    lines = [_clean_line(ln) for ln in sections.get("action", [])]
    lines = [ln for ln in lines if ln]
    if not lines:
        errors.append("no ACTION line")
        return ParsedAct(tag, subgoal, directive, "", "; ".join(errors))
    if multi_line:
        return ParsedAct(tag, subgoal, directive, "\n".join(lines), "; ".join(errors))
    action = match_legal(lines[0], legal_actions) if legal_actions else lines[0]
    if action is None:
        errors.append(f"illegal action {lines[0][:80]!r}")
        action = lines[0]
    return ParsedAct(tag, subgoal, directive, action, "; ".join(errors))


@dataclass(frozen=True)
class ParsedRetrieve:
    """A `retrieve` answer: the chosen skill id (None for NONE or an unusable answer) and why not."""

    skill_id: str | None
    error: str


def parse_retrieve(text: str, candidate_ids: list[str]) -> ParsedRetrieve:
    """`SKILL: <id>` or `SKILL: NONE`; an id outside the shown candidates counts as NONE with an error."""
    sections = _sections(text or "")
    answer = _clean_line(" ".join(sections.get("skill", [])[:1]))
    if not answer:
        return ParsedRetrieve(None, "no SKILL line")
    token = answer.split()[0].strip(_QUOTES + ".,")
    if token.upper() == "NONE":
        return ParsedRetrieve(None, "")
    by_key = {c.lower(): c for c in candidate_ids}
    if token.lower() in by_key:
        return ParsedRetrieve(by_key[token.lower()], "")
    return ParsedRetrieve(None, f"skill {token[:40]!r} is not among the shown candidates")
