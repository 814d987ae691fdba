"""`coplay eval --compare A.json B.json`: two evaluations (coplay.eval.write_eval files) side by side.

For each game both evaluated: the mean score of A and of B with their 95% t-intervals, the difference B − A
with a Welch 95% interval (the standard deviations are recovered from the stored t-intervals), whether the
two intervals overlap, and whether the difference's interval excludes 0. Avalon win rates (per side, per role)
use the Wilson intervals stored in the files and Newcombe's hybrid score interval for the difference of two
rates (Newcombe 1998, method 10); Diplomacy adds one row per power. Non-overlapping 95% intervals imply a
significant difference; overlapping ones do not imply its absence, hence both columns.
Where both files hold per-seed scores (`per_seed`) on shared start seeds, a second table pairs them seed by
seed: the mean of B − A with its t and bootstrap intervals (`coplay.eval.stats.paired_difference`), which
removes the spread both sides share. A game whose protocol check (`coplay.eval.ruler`, in either file's meta)
failed is labelled as not a result.
numpy/scipy + coplay.eval.stats, coplay.eval.ruler's labels and the games' seat lists only; never imports ray,
torch or the engines.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from coplay.eval.ruler import FAILED_LABEL, failed_games

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Comparison:
    """One row: a figure (mean score or win rate) of A and of B, their intervals and the difference B − A."""

    game: str
    group: str  # "score", "power:FRANCE", "win:side:good", ...
    n_a: int
    value_a: float
    ci_a: tuple[float, float]
    n_b: int
    value_b: float
    ci_b: tuple[float, float]
    difference: float
    difference_ci: tuple[float, float] | None  # None when a side has fewer than 2 episodes
    overlap: bool
    paired: bool = False  # B − A over shared start seeds (n = seeds both played), not Welch
    difference_boot: tuple[float, float] | None = None  # paired rows: the bootstrap interval of B − A
    protocol_failed: bool = False  # the bots did not separate on this protocol: not a result

    @property
    def difference_excludes_zero(self) -> bool | None:
        if self.difference_ci is None:
            return None
        return self.difference_ci[0] > 0 or self.difference_ci[1] < 0


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Closed intervals share at least one point."""
    return a[0] <= b[1] and b[0] <= a[1]


def t_quantile(df: float, confidence: float = CONFIDENCE) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + confidence / 2, df))


def std_from_t_interval(n: int, ci_low: float, ci_high: float, confidence: float = CONFIDENCE) -> float:
    """The sample standard deviation behind a Student-t interval: half = t(n−1) · s / √n."""
    if n < 2:
        return 0.0
    return (ci_high - ci_low) / 2 * math.sqrt(n) / t_quantile(n - 1, confidence)


def welch_df(s_a: float, n_a: int, s_b: float, n_b: int) -> float:
    """Welch–Satterthwaite degrees of freedom."""
    va, vb = s_a * s_a / n_a, s_b * s_b / n_b
    return (va + vb) ** 2 / (va * va / (n_a - 1) + vb * vb / (n_b - 1))


def welch_interval(mean_a: float, s_a: float, n_a: int, mean_b: float, s_b: float, n_b: int,
                   confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Interval for mean_b − mean_a without assuming equal variances; None when a side has n < 2."""
    if n_a < 2 or n_b < 2:
        return None
    d = mean_b - mean_a
    se = math.sqrt(s_a * s_a / n_a + s_b * s_b / n_b)
    if se == 0.0:
        return d, d
    half = t_quantile(welch_df(s_a, n_a, s_b, n_b), confidence) * se
    return d - half, d + half


def newcombe_interval(rate_a: float, ci_a: tuple[float, float], rate_b: float,
                      ci_b: tuple[float, float]) -> tuple[float, float]:
    """Interval for rate_b − rate_a from the two Wilson intervals (Newcombe's method 10)."""
    d = rate_b - rate_a
    low = d - math.sqrt((rate_b - ci_b[0]) ** 2 + (ci_a[1] - rate_a) ** 2)
    high = d + math.sqrt((ci_b[1] - rate_b) ** 2 + (rate_a - ci_a[0]) ** 2)
    return max(-1.0, low), min(1.0, high)


def _mean_row(game: str, group: str, a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    ci_a, ci_b = (a["ci_low"], a["ci_high"]), (b["ci_low"], b["ci_high"])
    s_a, s_b = std_from_t_interval(a["n"], *ci_a), std_from_t_interval(b["n"], *ci_b)
    return Comparison(game, group, a["n"], a["mean"], ci_a, b["n"], b["mean"], ci_b, b["mean"] - a["mean"],
                      welch_interval(a["mean"], s_a, a["n"], b["mean"], s_b, b["n"]),
                      intervals_overlap(ci_a, ci_b))


def _rate_row(game: str, group: str, a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    ci_a, ci_b = tuple(a["ci95"]), tuple(b["ci95"])
    return Comparison(game, f"win:{group}", a["n"], a["rate"], ci_a, b["n"], b["rate"], ci_b,
                      b["rate"] - a["rate"], newcombe_interval(a["rate"], ci_a, b["rate"], ci_b),
                      intervals_overlap(ci_a, ci_b))


def _paired_row(game: str, a: dict[str, Any], b: dict[str, Any]) -> Comparison | None:
    """B − A over the start seeds both evaluations played (None: fewer than 2 shared, or no per-seed
    scores, as in files written before they were stored)."""
    from coplay.eval.stats import paired_difference, t_interval

    pa, pb = a.get("per_seed") or {}, b.get("per_seed") or {}
    d = paired_difference(pa, pb)
    if d is None:
        return None
    shared = sorted(set(pa) & set(pb))
    ci_a, ci_b = t_interval([pa[k] for k in shared]), t_interval([pb[k] for k in shared])
    return Comparison(game, "score, paired by seed", d.n, d.mean_a, ci_a, d.n, d.mean_b, ci_b, d.difference,
                      (d.ci_low, d.ci_high), intervals_overlap(ci_a, ci_b), paired=True,
                      difference_boot=(d.boot_low, d.boot_high))


def compare_results(a: dict[str, Any], b: dict[str, Any]) -> list[Comparison]:
    """Rows for every game (and win-rate group, Diplomacy power) present in both results; a paired row
    after a game's score row where both hold per-seed scores on shared seeds."""
    rows = []
    for game in sorted(set(a) & set(b)):
        rows.append(_mean_row(game, "score", a[game]["score"], b[game]["score"]))
        paired = _paired_row(game, a[game], b[game])
        if paired is not None:
            rows.append(paired)
        for power in sorted(set(a[game].get("per_power", {})) & set(b[game].get("per_power", {}))):
            rows.append(_mean_row(game, f"power:{power}", a[game]["per_power"][power],
                                  b[game]["per_power"][power]))
        for group in sorted(set(a[game].get("win_rate", {})) & set(b[game].get("win_rate", {}))):
            rows.append(_rate_row(game, group, a[game]["win_rate"][group], b[game]["win_rate"][group]))
    return rows


def load_results(path: str | Path) -> dict[str, Any]:
    """An evaluation or probe file (`{"meta": ..., "results": {game: ...}}`); one line of error otherwise."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read an evaluation ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ValueError(f"{path}: expected {{'meta': ..., 'results': {{game: ...}}}} "
                         f"as written by coplay eval")
    return data


def _interval(ci: tuple[float, float] | None) -> str:
    return "n/a (n < 2)" if ci is None else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _verdict(r: Comparison) -> str:
    if r.protocol_failed:
        return "not a result"
    excludes = r.difference_excludes_zero
    return "n/a" if excludes is None else ("yes" if excludes else "no")


def comparison_table(rows: list[Comparison], name_a: str, name_b: str) -> str:
    """The side-by-side view as text (rich tables): the unpaired rows (Welch, Newcombe), then the rows paired
    by start seed where there are any."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"A = {name_a}   B = {name_b}   (95% intervals)")
    for col in ("game", "figure", "n A", "A", "A 95% CI", "n B", "B", "B 95% CI", "B − A", "95% CI of B − A",
                "CIs overlap", "B − A ≠ 0"):
        table.add_column(col, justify="left" if col in ("game", "figure") else "right")
    for r in (r for r in rows if not r.paired):
        table.add_row(r.game, r.group, str(r.n_a), f"{r.value_a:.2f}", _interval(r.ci_a), str(r.n_b),
                      f"{r.value_b:.2f}", _interval(r.ci_b), f"{r.difference:+.2f}",
                      _interval(r.difference_ci), "yes" if r.overlap else "no", _verdict(r))
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    paired = [r for r in rows if r.paired]
    if paired:
        ptable = Table(title="paired by start seed: B − A over the episodes both played from the same seed "
                             "(95% intervals)")
        for col in ("game", "figure", "shared seeds", "A", "B", "B − A", "95% CI (t)", "95% CI (bootstrap)",
                    "B − A ≠ 0"):
            ptable.add_column(col, justify="left" if col in ("game", "figure") else "right")
        for r in paired:
            ptable.add_row(r.game, r.group, str(r.n_a), f"{r.value_a:.2f}", f"{r.value_b:.2f}",
                           f"{r.difference:+.2f}", _interval(r.difference_ci), _interval(r.difference_boot),
                           _verdict(r))
        console.print(ptable)
    return console.export_text()


# (key, what it is, which compared games make it matter: single-player, multi-seat, any)
PROTOCOL_KEYS = (("episodes_single", "episodes per game", "single"),
                 ("episodes_per_seat", "episodes per seat", "multi"),
                 ("seeds_eval_start", "first seed", "any"), ("max_steps", "horizon (max steps)", "any"))


def recorded(meta: dict[str, Any], key: str) -> tuple[bool, Any]:
    """(whether the file records `key`, its value), wherever files of each age keep it: the meta's top
    level, its `protocol` block (`coplay.eval.ruler.protocol_meta`), or the ruler's protocol check."""
    for block in (meta, meta.get("protocol"), (meta.get("protocol_check") or {}).get("protocol")):
        if isinstance(block, dict) and key in block:
            return True, block[key]
    return False, None


def protocol_warnings(meta_a: dict[str, Any], meta_b: dict[str, Any],
                      games: list[str] | None = None) -> str:
    """One warning line per protocol setting in which the two evaluations really differ for the compared
    `games` (their scores then measure different things, and the intervals are not comparable as they
    stand): episodes per game where a single-player game is compared, episodes per seat where a multi-seat
    one is, the first seed, the horizon, and each game's env_kwargs. A setting one file does not record
    (written before evaluations recorded their protocol) is one note saying so, not a difference."""
    import coplay_envs

    games = games if games is not None else []
    kinds = {"any"} | {"multi" if coplay_envs.seats(g) else "single" for g in games}
    lines, unrecorded = [], []
    for key, label, kind in PROTOCOL_KEYS:
        if kind not in kinds:
            continue
        (has_a, a), (has_b, b) = recorded(meta_a, key), recorded(meta_b, key)
        if has_a and has_b and a != b:
            lines.append(f"warning: the two sides differ in {label}: {a} vs {b}\n")
        unrecorded += [f"{side} its {label}" for side, has in (("A", has_a), ("B", has_b)) if not has]
    (has_a, env_a), (has_b, env_b) = recorded(meta_a, "env_kwargs"), recorded(meta_b, "env_kwargs")
    if has_a and has_b:
        for game in games:
            game_a, game_b = (env_a or {}).get(game, {}), (env_b or {}).get(game, {})
            if game_a != game_b:
                lines.append(f"warning: the two sides differ in {game}'s env_kwargs: {game_a} vs {game_b}\n")
    if unrecorded:
        lines.append(f"note: not recorded, so not checked: {'; '.join(unrecorded)} (a file written before "
                     f"evaluations recorded their protocol)\n")
    return "".join(lines)


def protocol_lines(meta_a: dict[str, Any], meta_b: dict[str, Any], games: list[str],
                   results: dict[str, Any]) -> str:
    """What the files' protocol checks (`coplay.eval.ruler`) say about the compared games: one line per
    game whose check failed in either file (its rows are not a result), and one line naming the
    single-player games neither file checked."""
    lines = []
    for game in games:
        for side, meta in (("A", meta_a), ("B", meta_b)):
            check = ((meta.get("protocol_check") or {}).get("games") or {}).get(game)
            if isinstance(check, dict) and check.get("passed") is False:
                lines.append(f"{game}: {FAILED_LABEL} ({side}'s check: {check.get('reason')})\n")
                break
    checked = {g for m in (meta_a, meta_b) for g in ((m.get("protocol_check") or {}).get("games") or {})}
    unchecked = [g for g in games if g not in checked
                 and not {"win_rate", "per_power"} & set(results.get(g, {}))]
    if unchecked:
        lines.append(f"protocol not checked for {', '.join(unchecked)}: neither file carries the bots' "
                     f"protocol_check (written before the ruler, or with eval.ruler=false)\n")
    return "".join(lines)


def compare_files(path_a: str | Path, path_b: str | Path,
                  out: str | Path | None = None) -> tuple[str, list[Comparison]]:
    """Load two evaluation files, compare them, optionally write the rows as JSON to `out`."""
    a, b = load_results(path_a), load_results(path_b)
    rows = compare_results(a["results"], b["results"])
    if not rows:
        raise ValueError(f"{path_a} and {path_b} share no game: {sorted(a['results'])} "
                         f"vs {sorted(b['results'])}")
    meta_a, meta_b = a.get("meta", {}), b.get("meta", {})
    failed = set(failed_games(meta_a)) | set(failed_games(meta_b))
    rows = [replace(r, protocol_failed=r.game in failed) for r in rows]
    games = sorted({r.game for r in rows})
    text = (comparison_table(rows, str(path_a), str(path_b)) + protocol_warnings(meta_a, meta_b, games)
            + protocol_lines(meta_a, meta_b, sorted({r.game for r in rows}), a["results"]))
    only = sorted(set(a["results"]) ^ set(b["results"]))
    if only:
        text += f"games in only one of the two files (not compared): {', '.join(only)}\n"
    if out is not None:
        from coplay.files import write_json_atomic

        write_json_atomic(Path(out), {"a": str(path_a), "b": str(path_b), "meta_a": meta_a, "meta_b": meta_b,
                                      "protocol_failed_games": sorted(failed),
                                      "rows": [asdict(r) for r in rows]})
    return text, rows
