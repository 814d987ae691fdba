"""Contract literals (docs/agents.md): what a segment changed between its start and end windows.

`f↑` / `f↓`: a numeric feature rose / fell (window means); `b=true` / `b=false`: a boolean became true /
false (window majorities). Literals are plain strings so banks, prompts and rewards share one spelling.
Standard library only; never imports ray, torch or the engines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from coplay.types import Step

UP, DOWN = "↑", "↓"
FeatureView = Mapping[str, float | int | bool]


@dataclass(frozen=True)
class Literal:
    """One parsed literal: `feature`, and `kind` one of `up`, `down`, `true`, `false`."""

    feature: str
    kind: str

    def __str__(self) -> str:
        return {"up": f"{self.feature}{UP}", "down": f"{self.feature}{DOWN}",
                "true": f"{self.feature}=true", "false": f"{self.feature}=false"}[self.kind]

    @property
    def is_add(self) -> bool:
        """`f↑` and `b=true` are add effects; `f↓` and `b=false` delete effects."""
        return self.kind in ("up", "true")


class LiteralError(ValueError):
    """Text that is not a contract literal."""


def parse_literal(text: str) -> Literal:
    """`max_tile↑`, `max_tile up`, `holes↓`, `danger=true`, `danger=false` -> `Literal`."""
    if not isinstance(text, str):
        raise LiteralError(f"literal must be a string, got {type(text).__name__}")
    s = text.strip().replace(" ", "")
    for suffix, kind in ((UP, "up"), ("^", "up"), ("+", "up"), ("up", "up"),
                         (DOWN, "down"), ("-", "down"), ("down", "down")):
        if s.endswith(suffix) and "=" not in s:
            name = s[: -len(suffix)]
            if _is_name(name):
                return Literal(name, kind)
    if "=" in s:
        name, _, value = s.partition("=")
        name = name.rstrip("=")
        if _is_name(name) and value.lower() in ("true", "false"):
            return Literal(name, value.lower())
    raise LiteralError(f"{text!r} is not a contract literal (expected f↑, f↓, b=true or b=false)")


def _is_name(name: str) -> bool:
    return bool(name) and name[0].isalpha() and all(c.isalnum() or c == "_" for c in name)


def window_view(views: Sequence[FeatureView], ties: str = "last") -> dict[str, float | bool]:
    """One view standing for a window: booleans by majority, numbers by mean. A boolean tie takes the
    value of the view nearest the segment's edge (`ties="first"` for a start window, "last" for an end
    window). A feature missing from some views is taken over the views that have it."""
    totals: dict[str, list[float]] = {}
    flags: dict[str, list[bool]] = {}
    for view in views:
        for name, value in view.items():
            if isinstance(value, bool):
                flags.setdefault(name, []).append(value)
            else:
                totals.setdefault(name, []).append(float(value))
    out: dict[str, float | bool] = {n: sum(v) / len(v) for n, v in totals.items() if n not in flags}
    for name, values in flags.items():
        if name not in totals:
            trues = sum(values)
            out[name] = (values[0 if ties == "first" else -1] if trues * 2 == len(values)
                         else trues * 2 > len(values))
    return out


def feature_kinds(view: Mapping[str, object]) -> dict[str, str]:
    """name -> "bool" or "number" for the features of one view (what expressions and grammars are over)."""
    return {name: "bool" if isinstance(value, bool) else "number" for name, value in sorted(view.items())}


def literals_of_views(start: FeatureView, end: FeatureView) -> frozenset[str]:
    """Literals from a start view to an end view (features of different kinds in the two are skipped)."""
    found: set[str] = set()
    for name in start.keys() & end.keys():
        a, b = start[name], end[name]
        if isinstance(a, bool) and isinstance(b, bool):
            if a != b:
                found.add(f"{name}={'true' if b else 'false'}")
        elif isinstance(a, bool) or isinstance(b, bool):
            continue
        elif b > a + 1e-9:
            found.add(f"{name}{UP}")
        elif b < a - 1e-9:
            found.add(f"{name}{DOWN}")
    return frozenset(found)


def literals_between(start: Sequence[FeatureView], end: Sequence[FeatureView]) -> frozenset[str]:
    """Literals holding from the `start` window to the `end` window (each a list of feature views)."""
    if not start or not end:
        return frozenset()
    return literals_of_views(window_view(start, "first"), window_view(end, "last"))


def segment_windows(steps: Sequence[Step], window: int) -> tuple[list[FeatureView], list[FeatureView]]:
    """Start window: `features_before` of the first w steps; end window: `features_after` of the last w
    steps; w = min(window, len // 2), at least 1."""
    w = max(1, min(window, len(steps) // 2))
    return [s.features_before for s in steps[:w]], [s.features_after for s in steps[-w:]]


def segment_literals(steps: Sequence[Step], window: int = 1) -> frozenset[str]:
    """The effects of a segment: its literals between start and end windows."""
    if not steps:
        return frozenset()
    start, end = segment_windows(steps, window)
    return literals_between(start, end)


def literal_holds(literal: str, before: FeatureView, after: FeatureView) -> bool:
    """Whether `literal` holds between two views (the `act` reward's "newly satisfied" test)."""
    parsed = parse_literal(literal)
    return str(parsed) in literals_between([before], [after])


def satisfied_share(contract_literals: Iterable[str], effects: Iterable[str]) -> float:
    """Share of a contract's literals present in `effects` (0 for an empty contract)."""
    wanted = set(contract_literals)
    return len(wanted & set(effects)) / len(wanted) if wanted else 0.0


def split_add_del(literals: Iterable[str]) -> tuple[list[str], list[str]]:
    """Add effects (f↑, b=true) and delete effects (f↓, b=false), each sorted."""
    add, dele = [], []
    for text in literals:
        (add if parse_literal(text).is_add else dele).append(text)
    return sorted(add), sorted(dele)
