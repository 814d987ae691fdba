"""The grammar of a `contract` answer as one regular expression (`skill_bank.constrained_contracts`).

Why: a 135 M-parameter model taught the protocol format by a short cold start writes the EFFECTS line and
starts the JSON object, then repeats a phrase until the token limit (greedy: "raise raise raise ..."), so no
answer parses and every skill keeps its deterministic protocol. Sampled under this regex, every finished
answer is a protocol `parse_protocol` accepts: the EFFECTS line lists literals of the bank's own features,
then the JSON object has exactly the keys the prompt asks for, in the teacher's layout (`json.dumps`), with
bounded strings and validator expressions over the bank's features. What the answer says stays the model's:
which effects, which plan, which thresholds. Engines sample under it (vLLM structured outputs, the HF
engine's token masks) and the learner masks its logits the same way (`Sample.meta["regex"]`), as for
constrained `act` answers (coplay/agent/constraint.py). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

SUMMARY_MAX_CHARS = 128  # under prompts.MAX_SUMMARY_CHARS, and short enough to fit the token budget
PLAN_STEP_MAX_CHARS = 96  # under prompts.MAX_PLAN_STEP_CHARS
MAX_CONDITIONS = 6  # comparisons per expression
JSON_TEXT_CHAR = "[ !#-\\[\\]-~]"  # printable ASCII but quote and backslash: JSON needs no escape
_NUMBER = "-?[0-9]{1,7}(\\.[0-9]{1,4})?(e[-+][0-9]{2})?"
_COMPARATORS = "(<|<=|>|>=|==|!=)"


def _names(names: list[str]) -> str:
    return "(" + "|".join(re.escape(n) for n in sorted(names)) + ")"


def _values(values: Sequence[int | float]) -> str:
    """An alternation of the values, longest first (so `1024` is never cut to `10` by a matcher)."""
    ordered = sorted(set(values), key=lambda v: (-len(str(v)), v))
    return "(" + "|".join(re.escape(str(v)) for v in ordered) + ")"


def _condition(numbers: list[str], flags: list[str],
               scales: Mapping[str, Sequence[int | float]] | None = None) -> str:
    options = ["true", "false"]
    scales = scales or {}
    free = [n for n in numbers if not scales.get(n)]
    if free:
        options.append(f"{_names(free)} {_COMPARATORS} {_NUMBER}")
    for name in sorted(n for n in numbers if scales.get(n)):  # a threshold on the feature's own scale
        options.append(f"{re.escape(name)} {_COMPARATORS} {_values(scales[name])}")
    if flags:
        options.append(f"{_names(flags)}( (==|!=) (true|false))?")
    return "(not )?(" + "|".join(options) + ")"


def expression_regex(features: Mapping[str, str], max_conditions: int = MAX_CONDITIONS,
                     scales: Mapping[str, Sequence[int | float]] | None = None) -> str:
    """The regex of a validator expression over `features` (name -> "bool" or "number"): up to
    `max_conditions` comparisons joined by `and` / `or`, each optionally negated. `scales`: per numeric
    feature the values its thresholds may take (`coplay_envs.feature_scales`); others take any number."""
    numbers = [n for n, kind in features.items() if kind != "bool"]
    flags = [n for n, kind in features.items() if kind == "bool"]
    condition = _condition(numbers, flags, scales)
    return f"{condition}( (and|or) {condition}){{0,{max_conditions - 1}}}"


def contract_regex(features: Mapping[str, str]) -> str:
    """The regex of a `contract` answer over a bank's `features` (name -> "bool" or "number")."""
    numbers = [n for n, kind in features.items() if kind != "bool"]
    flags = [n for n, kind in features.items() if kind == "bool"]
    literals = []
    if numbers:
        literals.append(f"{_names(numbers)}(↑|↓)")
    if flags:
        literals.append(f"{_names(flags)}=(true|false)")
    literal = "(" + "|".join(literals) + ")" if literals else None
    more = max(0, len(features) - 1)  # each feature moves at most one way
    effects = f"({literal}(, {literal}){{0,{more}}}|\\(none\\))" if literal else "\\(none\\)"
    expression = expression_regex(features)
    step = f'"{JSON_TEXT_CHAR}{{1,{PLAN_STEP_MAX_CHARS}}}"'
    return (f"EFFECTS: {effects}\\n"
            f'\\{{"summary": "{JSON_TEXT_CHAR}{{1,{SUMMARY_MAX_CHARS}}}", '
            f'"plan": \\[{step}(, {step}){{1,6}}\\], '
            f'"preconditions": "{expression}", "success": "{expression}", "abort": "{expression}"\\}}')
