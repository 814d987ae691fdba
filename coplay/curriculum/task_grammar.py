"""The grammar of a proposer's answer as one regular expression (`curriculum.constrained_tasks`).

Why: `propose` has no cold-start teacher data, so a small base model asked for a JSON task writes prose, a
half object or a position the schema rejects, and the gate's figures then say only that the model cannot
write JSON. Sampled under this regex, every finished answer is one object in `TASK_SCHEMA`'s key order with a
position of the game's own shape, a bounded goal, a contract in the expression language over the game's
features, and a bound in [1, max_bound]. What the task says stays the model's: the position, the goal, the
thresholds and the bound, so the gate still rejects illegal positions, trivial and unreachable contracts.
Engines sample under it (vLLM structured outputs, the HF engine's token masks) and the learner masks its
logits the same way (`Sample.meta["regex"]`), as for constrained contracts (`skills/contract_grammar.py`).

With `curriculum.position: dealt` the position is `{}`: the game deals it (a Candy Crush board the model
writes mostly has a line already, which the env refuses).

Thresholds are on each game's scale (`coplay_envs.feature_scales`: 2048 tiles are powers of two, Candy Crush
scores ones a few moves reach), so a proposer cannot write a contract about a state the game cannot have.
A position grammar exists for the games whose state is a small board (2048: a 4 x 4 grid of 0 and powers of
two; Candy Crush: 8 rows of 8 candies of its colours); other games have none and their answers stay free.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coplay.skills.contract_grammar import JSON_TEXT_CHAR, expression_regex

GOAL_MAX_CHARS = 96  # under task.MAX_GOAL_CHARS, and short enough for the token budget
MAX_TASK_CONDITIONS = 3  # comparisons in a task's contract

_TILE = "(0|2|4|8|16|32|64|128|256|512|1024|2048)"
_TILE_ROW = f"\\[{_TILE}(, {_TILE}){{3}}\\]"
_CANDY_ROW = '"[RGBY]{8}"'
POSITIONS: dict[str, str] = {
    "2048": f'\\{{"board": \\[{_TILE_ROW}(, {_TILE_ROW}){{3}}\\]\\}}',
    "candy_crush": f'\\{{"board": \\[{_CANDY_ROW}(, {_CANDY_ROW}){{7}}\\]\\}}',
}


def bound_regex(max_bound: int) -> str:
    """An integer in [1, max_bound], as an alternation (small bounds: the model picks one)."""
    return "(" + "|".join(str(b) for b in range(max_bound, 0, -1)) + ")"


def task_regex(game: str, features: Mapping[str, str], max_bound: int,
               scales: Mapping[str, Sequence[int | float]] | None = None, dealt: bool = False) -> str | None:
    """The regex of a `propose` answer on `game` (None: the game has no position grammar). `scales`: the
    values each feature's thresholds may take (default: the game's own, `coplay_envs.feature_scales`).
    `dealt` (`curriculum.position: dealt`): the position is the round's deal, written `{}`."""
    position = POSITIONS.get(game)
    if position is None:
        return None
    if dealt:
        position = "\\{\\}"
    if scales is None:
        import coplay_envs

        scales = coplay_envs.feature_scales(game)
    contract = expression_regex(features, MAX_TASK_CONDITIONS, scales)
    return (f'\\{{"position": {position}, "goal": "{JSON_TEXT_CHAR}{{1,{GOAL_MAX_CHARS}}}", '
            f'"contract": "{contract}", "bound": {bound_regex(max_bound)}\\}}')
