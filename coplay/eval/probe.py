"""The per-decision probe: a fixed, versioned set of positions per single-player game on which a policy's
chosen action is scored by its regret against the game's own lookahead (docs/evaluation.md).

Why: whole-episode scores are noisy (on 2048 at 8-12 moves the random bot outscores the expert). Here each
position carries the lookahead value of every legal action and of the game's fallback for an unusable
answer, so one decision per position gives a regret: best value - value of the chosen action. Means over
the probe, with 95% t and bootstrap intervals (`coplay.eval.stats.summarize`), rank policies.

Use: `probe = load_or_build("2048")`; for each `position` of `probe.positions`, `observe(position)` gives
the (observation, info) a policy sees; `score_actions(probe, chosen)` with the chosen action strings (None
for no answer). `bot_actions(probe, "expert")` gives the bots' choices for comparison.

How positions and values are made: `coplay.eval.probe_values`. Pure Python + numpy: never imports ray,
torch or an engine.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import coplay_envs
from coplay.eval.action_spread import action_counts
from coplay.eval.probe_values import (
    FALLBACK_ACTION,
    PROBE_VERSION,
    ProbeParams,
    action_values,
    draw_positions,
    probe_params,
    value_draws,
)
from coplay.eval.stats import summarize
from coplay.files import sha256_bytes, write_bytes_atomic

__all__ = ["FALLBACK_ACTION", "PROBE_VERSION", "Judgement", "Position", "ProbeParams", "ProbeSet",
           "bot_actions", "build_probe", "default_cache_dir", "intervals_disjoint", "judge", "load_or_build",
           "make_position", "observe", "probe_params", "regret", "resolve_action", "score_actions"]

log = logging.getLogger(__name__)

#: A value within this (relative to max(1, |best|)) of the best value counts as a best choice: values are
#: means of integer returns, so real ties are exact and anything else differs by far more.
BEST_TOLERANCE: float = 1e-9


@dataclass(frozen=True)
class Position:
    """One probe position: where it came from, the full env state to reset to, and the lookahead value of
    each legal action (aligned with `legal_actions`) and of the game's fallback for an unusable action."""

    game: str
    env_kwargs: dict[str, Any]
    source: str  # the bot whose play reached it: "expert" or "random"
    seed: int  # reset(seed=seed) of the game that reached it
    step: int  # steps played from that reset
    state: dict[str, Any]  # info["state"]: reset(options={"state": state}) restores the position
    legal_actions: list[str]
    values: list[float]
    fallback_value: float
    best_value: float

    def value_of(self, action: str) -> float:
        return self.values[self.legal_actions.index(action)]

    @property
    def best_actions(self) -> list[str]:
        return [a for a, v in zip(self.legal_actions, self.values, strict=True) if self._is_best(v)]

    def _is_best(self, value: float) -> bool:
        return value >= self.best_value - BEST_TOLERANCE * max(1.0, abs(self.best_value))

    def as_dict(self) -> dict[str, Any]:
        return {"game": self.game, "env_kwargs": self.env_kwargs, "source": self.source, "seed": self.seed,
                "step": self.step, "state": self.state, "legal_actions": self.legal_actions,
                "values": self.values, "fallback_value": self.fallback_value, "best_value": self.best_value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Position:
        return cls(str(d["game"]), dict(d["env_kwargs"]), str(d["source"]), int(d["seed"]), int(d["step"]),
                   dict(d["state"]), [str(a) for a in d["legal_actions"]], [float(v) for v in d["values"]],
                   float(d["fallback_value"]), float(d["best_value"]))


@dataclass(frozen=True)
class ProbeSet:
    """A game's probe: `PROBE_VERSION` and the build parameters define it; `positions` are what they
    build. `to_bytes` is canonical (sorted keys, no whitespace) and ends with the sha256 of the rest."""

    game: str
    version: int
    params: ProbeParams
    positions: list[Position]

    def payload(self) -> dict[str, Any]:
        return {"game": self.game, "probe_version": self.version, "params": self.params.as_dict(),
                "positions": [p.as_dict() for p in self.positions]}

    @property
    def sha256(self) -> str:
        return sha256_bytes(_canonical(self.payload()))

    def to_bytes(self) -> bytes:
        return _canonical({**self.payload(), "sha256": self.sha256})

    @classmethod
    def from_bytes(cls, data: bytes) -> ProbeSet:
        """Parse and verify a probe file; ValueError when it is not one or its sha256 does not match."""
        try:
            doc = json.loads(data)
            params = ProbeParams(**doc["params"])
            probe = cls(str(doc["game"]), int(doc["probe_version"]), params,
                        [Position.from_dict(p) for p in doc["positions"]])
            stored = doc["sha256"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"not a probe file: {type(err).__name__}: {err}") from err
        if stored != probe.sha256:
            raise ValueError(f"probe sha256 mismatch: file says {stored}, content hashes to {probe.sha256}")
        return probe


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


# ------------------------------------------------------------------------------------------ build and cache
def build_probe(game: str, n: int = 128, params: ProbeParams | None = None,
                progress: Callable[[int, int], None] | None = None, **overrides: Any) -> ProbeSet:
    """Draw and value `n` positions of `game` with its default parameters (or `params`, or the defaults
    with `overrides`, e.g. `horizon=5`). Deterministic: the same parameters give the same bytes."""
    params = params or probe_params(game, n, **overrides)
    draws = draw_positions(params)
    valued = value_draws(params, draws, progress)
    positions = [Position(game, dict(params.env_kwargs), d.source, d.seed, d.step, d.state,
                          d.legal_actions, values, fallback, max(values))
                 for d, (values, fallback) in zip(draws, valued, strict=True)]
    return ProbeSet(game, PROBE_VERSION, params, positions)


def make_position(params: ProbeParams, state: dict[str, Any], source: str = "hand", seed: int = 0,
                  step: int = 0) -> Position:
    """A position valued like the probe's own from any `info["state"]` of `params.game` (a hand-made one
    included); `seed` and `step` name it and key its rollouts."""
    env = coplay_envs.make_env(params.game, **params.env_kwargs)
    _, info = env.reset(options={"state": state})
    legal = list(info["legal_actions"])
    values = action_values(params, info["state"], [*legal, FALLBACK_ACTION], seed, step)
    fallback = values.pop()
    best = max(values) if values else fallback
    return Position(params.game, dict(params.env_kwargs), source, seed, step, info["state"], legal, values,
                    fallback, best)


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/coplay/probes`, else `~/.cache/coplay/probes`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coplay" / "probes"


def cache_path(params: ProbeParams, cache_dir: str | Path | None = None) -> Path:
    """Where the probe of `params` is cached: one file per version and parameter set."""
    digest = sha256_bytes(_canonical(params.as_dict()))[:16]
    return Path(cache_dir or default_cache_dir()) / f"{params.game}-v{PROBE_VERSION}-{digest}.json"


def load_or_build(game: str, cache_dir: str | Path | None = None, n: int = 128,
                  params: ProbeParams | None = None, **overrides: Any) -> ProbeSet:
    """The cached probe when its version, parameters and sha256 match; otherwise build it and write the
    cache. A corrupt or mismatched file is rebuilt with a logged warning (never an error)."""
    params = params or probe_params(game, n, **overrides)
    path = cache_path(params, cache_dir)
    if path.is_file():
        try:
            probe = ProbeSet.from_bytes(path.read_bytes())
        except (OSError, ValueError) as err:
            log.warning("probe cache %s is unreadable (%s); rebuilding it", path, err)
        else:
            if probe.version == PROBE_VERSION and probe.params == params and probe.game == game:
                return probe
            log.warning("probe cache %s holds version %s / other parameters; rebuilding it", path,
                        probe.version)
    start = time.perf_counter()
    probe = build_probe(game, params=params)
    log.info("built the %s probe (%d positions) in %.1f s: %s", game, len(probe.positions),
             time.perf_counter() - start, path)
    write_bytes_atomic(path, probe.to_bytes())
    return probe


# ------------------------------------------------------------------------------------------ scoring
def observe(position: Position) -> tuple[str, dict[str, Any]]:
    """What a policy sees at `position`: the env's (observation, info) after resetting to its state."""
    env = coplay_envs.make_env(position.game, **position.env_kwargs)
    return env.reset(options={"state": position.state})


def resolve_action(position: Position, action: str | None) -> str | None:
    """The legal action `action` amounts to, or None when the game would treat it as unusable.

    An exact legal string is itself. Any other string is stepped from the position and compared by the
    resulting state with each legal action, so a spelling the game accepts (`UP`, a reversed Candy Crush
    swap, an equivalent Tetris rotation) counts as the move it makes, and anything the game flags invalid,
    or that makes no legal move (a Candy Crush swap without a line), counts as the fallback."""
    if action is None:
        return None
    if action in position.legal_actions:
        return action
    env = coplay_envs.make_env(position.game, **position.env_kwargs)
    env.reset(options={"state": position.state})
    *_, info = env.step(action)
    if info["invalid_action"]:
        return None
    after = info["state"]
    for legal in position.legal_actions:
        env.reset(options={"state": position.state})
        if env.step(legal)[-1]["state"] == after:
            return legal
    return None


@dataclass(frozen=True)
class Judgement:
    """How one chosen action scored at one position."""

    action: str | None  # the legal action it resolved to, None when it was unusable
    value: float
    regret: float
    best: bool
    invalid: bool


def judge(position: Position, action: str | None) -> Judgement:
    """Value, regret (best value - value) and whether it was a best action, of `action` at `position`; an
    action that is not a legal one scores the fallback's value."""
    resolved = resolve_action(position, action)
    value = position.fallback_value if resolved is None else position.value_of(resolved)
    return Judgement(resolved, value, position.best_value - value, position._is_best(value), resolved is None)


def regret(position: Position, action: str | None) -> float:
    """Best value - value of `action` (the fallback's value when it is not a legal action)."""
    return judge(position, action).regret


def score_actions(probe: ProbeSet, actions: list[str | None]) -> dict[str, Any]:
    """One chosen action per position, in `probe.positions` order -> n, mean regret with 95% t and
    bootstrap intervals (`regret`: `summarize`'s fields), share of best choices, share of invalid ones, the
    regret at each position (`regrets`, in position order: paired comparisons of two policies), and how
    often each legal action was chosen (`actions`, the legal action each answer amounts to; how the choices
    spread, `coplay.eval.action_spread`)."""
    if len(actions) != len(probe.positions):
        raise ValueError(f"score_actions: {len(actions)} actions for {len(probe.positions)} positions")
    judged = [judge(p, a) for p, a in zip(probe.positions, actions, strict=True)]
    summary = summarize([j.regret for j in judged])
    n = len(judged)
    return {"n": n, "mean_regret": summary.mean, "regret": summary.as_dict(),
            "best_share": sum(j.best for j in judged) / n,
            "invalid_share": sum(j.invalid for j in judged) / n, "regrets": [j.regret for j in judged],
            "actions": action_counts([j.action for j in judged])}


def bot_actions(probe: ProbeSet, kind: str, seed: int = 0) -> list[str]:
    """The `kind` bot's choice at each position (a fresh bot per position, seeded `seed` + the position's
    seed, so the list does not depend on the order positions are asked in)."""
    chosen: list[str] = []
    for position in probe.positions:
        observation, info = observe(position)
        bot = coplay_envs.make_bot(position.game, kind, seed=seed + position.seed)
        chosen.append(bot.act(observation, info).action)
    return chosen


def intervals_disjoint(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two `score_actions` results have disjoint 95% mean-regret intervals, t and bootstrap both."""
    ra, rb = a["regret"], b["regret"]
    t = ra["ci_high"] < rb["ci_low"] or rb["ci_high"] < ra["ci_low"]
    boot = ra["boot_high"] < rb["boot_low"] or rb["boot_high"] < ra["boot_low"]
    return t and boot
