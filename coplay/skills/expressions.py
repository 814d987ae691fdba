"""The validator language of skill protocols: preconditions, success and abort over a features view.

A small parsed language, never `eval`-ed. Grammar (keywords are lower case):

    expr    := or_expr
    or_expr := and_expr ("or" and_expr)*
    and_expr:= not_expr ("and" not_expr)*
    not_expr:= "not" not_expr | compare
    compare := atom (("<" | "<=" | ">" | ">=" | "==" | "!=") atom)?
    atom    := NUMBER | "true" | "false" | NAME | "(" expr ")"

NAME is a feature name (`[A-Za-z][A-Za-z0-9_]*`, no leading underscore, no dots, no calls). A bare NAME is
true when the feature is truthy. Anything else (calls, attributes, indexing, strings, arithmetic) is a parse
error. Standard library only; never imports ray, torch or the engines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Value = float | int | bool

_TOKEN = re.compile(r"\s*(?:(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z][A-Za-z0-9_]*)"
                    r"|(?P<op><=|>=|==|!=|<|>)|(?P<paren>[()]))")
_KEYWORDS = {"and", "or", "not", "true", "false"}
_COMPARATORS = ("<=", ">=", "==", "!=", "<", ">")
MAX_EXPRESSION_CHARS = 400


class ExpressionError(ValueError):
    """An expression that does not parse, names an unknown feature, or cannot be evaluated."""


@dataclass(frozen=True)
class Const:
    value: float | bool


@dataclass(frozen=True)
class Feature:
    name: str


@dataclass(frozen=True)
class Compare:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    operands: tuple[Node, ...]


Node = Const | Feature | Compare | Not | BoolOp


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ExpressionError(f"expression {text!r}: unexpected character "
                                  f"{text[pos:].lstrip()[:1]!r} at {pos}")
        kind = m.lastgroup or ""
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        token = self.peek()
        if token is None:
            raise ExpressionError(f"expression {self.text!r}: ends too early")
        self.pos += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token == ("name", word):
            self.pos += 1
            return True
        return False

    def parse(self) -> Node:
        node = self.or_expr()
        if self.peek() is not None:
            raise ExpressionError(f"expression {self.text!r}: unexpected {self.peek()[1]!r} "
                                  f"after a full expression")
        return node

    def or_expr(self) -> Node:
        parts = [self.and_expr()]
        while self.keyword("or"):
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else BoolOp("or", tuple(parts))

    def and_expr(self) -> Node:
        parts = [self.not_expr()]
        while self.keyword("and"):
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else BoolOp("and", tuple(parts))

    def not_expr(self) -> Node:
        if self.keyword("not"):
            return Not(self.not_expr())
        return self.compare()

    def compare(self) -> Node:
        left = self.atom()
        token = self.peek()
        if token is not None and token[0] == "op":
            self.pos += 1
            return Compare(token[1], left, self.atom())
        return left

    def atom(self) -> Node:
        kind, value = self.take()
        if kind == "num":
            return Const(float(value))
        if kind == "paren" and value == "(":
            node = self.or_expr()
            if self.take() != ("paren", ")"):
                raise ExpressionError(f"expression {self.text!r}: missing ')'")
            return node
        if kind == "name":
            if value == "true":
                return Const(True)
            if value == "false":
                return Const(False)
            if value in _KEYWORDS:
                raise ExpressionError(f"expression {self.text!r}: keyword {value!r} "
                                      f"where a value was expected")
            nxt = self.peek()
            if nxt == ("paren", "("):
                raise ExpressionError(f"expression {self.text!r}: calls are not allowed ({value}(...))")
            return Feature(value)
        raise ExpressionError(f"expression {self.text!r}: unexpected {value!r}")


@dataclass(frozen=True)
class Expression:
    """A parsed expression and the text it came from."""

    text: str
    root: Node

    @property
    def features(self) -> set[str]:
        """Feature names the expression reads."""
        return set(_names(self.root))

    @property
    def thresholds(self) -> list[tuple[str, float]]:
        """(feature, number) of every comparison of a feature with a numeric constant."""
        return list(_thresholds(self.root))

    def evaluate(self, features: Mapping[str, Value]) -> bool:
        """Truth value under `features`; a feature it reads but the view lacks raises `ExpressionError`."""
        return bool(_eval(self.root, features, self.text))

    def holds(self, features: Mapping[str, Value]) -> bool:
        """Like `evaluate`, but a missing feature makes the expression not hold (never raises)."""
        try:
            return self.evaluate(features)
        except ExpressionError:
            return False


def _names(node: Node) -> Iterable[str]:
    if isinstance(node, Feature):
        yield node.name
    elif isinstance(node, Compare):
        yield from _names(node.left)
        yield from _names(node.right)
    elif isinstance(node, Not):
        yield from _names(node.operand)
    elif isinstance(node, BoolOp):
        for operand in node.operands:
            yield from _names(operand)


def _thresholds(node: Node) -> Iterable[tuple[str, float]]:
    if isinstance(node, Compare):
        for feature, const in ((node.left, node.right), (node.right, node.left)):
            numeric = isinstance(const, Const) and not isinstance(const.value, bool)
            if isinstance(feature, Feature) and numeric:
                yield feature.name, float(const.value)
    elif isinstance(node, Not):
        yield from _thresholds(node.operand)
    elif isinstance(node, BoolOp):
        for operand in node.operands:
            yield from _thresholds(operand)


def _eval(node: Node, features: Mapping[str, Value], text: str) -> Value:
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Feature):
        if node.name not in features:
            raise ExpressionError(f"expression {text!r}: feature {node.name!r} is not in the view")
        return features[node.name]
    if isinstance(node, Not):
        return not _eval(node.operand, features, text)
    if isinstance(node, BoolOp):
        if node.op == "and":
            return all(_eval(o, features, text) for o in node.operands)
        return any(_eval(o, features, text) for o in node.operands)
    left, right = float(_eval(node.left, features, text)), float(_eval(node.right, features, text))
    return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right,
            "==": left == right, "!=": left != right}[node.op]


def parse_expression(text: str, known_features: Iterable[str] | None = None) -> Expression:
    """Parse `text`; with `known_features`, every name must be one of them. Empty text means `true`."""
    if not isinstance(text, str):
        raise ExpressionError(f"expression must be a string, got {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression is {len(text)} characters; at most {MAX_EXPRESSION_CHARS} allowed")
    stripped = text.strip()
    if not stripped:
        return Expression("true", Const(True))
    expression = Expression(stripped, _Parser(stripped).parse())
    if known_features is not None:
        known = set(known_features)
        unknown = sorted(expression.features - known)
        if unknown:
            raise ExpressionError(f"expression {stripped!r}: unknown feature(s) {unknown}; "
                                  f"known: {sorted(known)}")
    return expression


def is_valid_expression(text: str, known_features: Iterable[str] | None = None) -> bool:
    """True when `text` parses (and names only known features)."""
    try:
        parse_expression(text, known_features)
    except ExpressionError:
        return False
    return True


def conjunction(parts: Iterable[str]) -> str:
    """`a and b and c`, or `true` for none."""
    items = [p for p in parts if p]
    return " and ".join(f"({p})" if " or " in p else p for p in items) or "true"


def disjunction(parts: Iterable[str]) -> str:
    """`a or b`, or `false` for none."""
    items = [p for p in parts if p]
    return " or ".join(items) or "false"


def format_value(value: Value) -> str:
    """A constant as the language writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:.4g}"
