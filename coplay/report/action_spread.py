"""The run report's view of how the policy's choices spread over the actions (`coplay.eval.action_spread`):
on the per-decision probe, the model's distribution beside the expert bot's on the same positions, and the
collapse warnings counted over the run; in the cold start, how the `act` teacher examples were balanced
(`coplay.learn.act_balance`). HTML fragments; never imports ray or torch.

Why: a policy that plays one move everywhere can still show a middling mean regret; the table makes the
collapse visible at the iteration it happened (iteration 0 is the cold start).
"""

from __future__ import annotations

import html
from typing import Any

from coplay.report.data import EvalFile

e = html.escape
SHOWN = 8  # actions per table; the rest are summed in one row (Candy Crush and Tetris have ~100)


def _pct(count: int, n: int) -> str:
    return f"{count} ({count / n:.0%})" if n else str(count)


def _table(title: str, spread: dict[str, Any]) -> str:
    n = int(spread.get("n") or 0)
    rows = list(spread.get("actions") or [])
    shown, rest = rows[:SHOWN], rows[SHOWN:]
    body = "".join(f"<tr><td>{e(str(r['action']))}</td><td>{_pct(r['model'], n)}</td>"
                   f"<td>{_pct(r['expert'], n)}</td></tr>" for r in shown)
    if rest:
        body += (f"<tr><td>{len(rest)} other actions</td><td>{_pct(sum(r['model'] for r in rest), n)}</td>"
                 f"<td>{_pct(sum(r['expert'] for r in rest), n)}</td></tr>")
    expert_invalid = n - sum(r["expert"] for r in rows)
    body += (f"<tr><td>unusable answer</td><td>{_pct(int(spread.get('model_invalid') or 0), n)}</td>"
             f"<td>{_pct(expert_invalid, n)}</td></tr>")
    flag = (" <span class='problem'>one action dominates where the expert's choices spread</span>"
            if spread.get("collapsed") else "")
    return (f"<h4>{e(title)}{flag}</h4><table class='spread'><tr><th>action</th><th>model</th>"
            f"<th>expert bot</th></tr>{body}</table>"
            f"<p class='note'>total variation distance {float(spread.get('total_variation') or 0):.2f} "
            f"over {n} positions</p>")


def probe_spread(probes: list[EvalFile]) -> str:
    """Per game, the action tables of the first probed iteration (the cold start's, when it was probed) and
    the last, and how many probes warned of a collapse. "" when no probe file has a spread (older runs)."""
    with_spread = sorted((p for p in probes if any(isinstance(r, dict) and r.get("action_spread")
                                                   for r in p.results.values())),
                         key=lambda p: p.iteration or 0)
    if not with_spread:
        return ""
    out = ["<h3>How the model's choices spread over the actions, beside the expert bot's</h3>"]
    games = sorted({g for p in with_spread for g, r in p.results.items() if r.get("action_spread")})
    for game in games:
        points = [p for p in with_spread if (p.results.get(game) or {}).get("action_spread")]
        warned = [p.iteration for p in points if p.results[game]["action_spread"].get("collapsed")]
        count = (f"{len(warned)} of {len(points)} probes warned of a collapse "
                 f"(iterations {', '.join(str(i) for i in warned)})" if warned
                 else f"no collapse warning in {len(points)} probes")
        out.append(f"<p class='{'problem' if warned else 'meta'}'>{e(game)}: {e(count)}</p>")
        for point in (points[0], points[-1]) if len(points) > 1 else points[:1]:
            when = "the cold start (iteration 0)" if point.iteration == 0 else f"iteration {point.iteration}"
            out.append(_table(f"{game}, {when}", point.results[game]["action_spread"]))
    out.append("<p class='note'>The action each answer amounted to at every probe position (counts and "
               "shares), beside the expert bot's choice at the same position. A collapse: one action on "
               "more than half of the positions where the expert chose it on at most half "
               "(docs/evaluation.md).</p>")
    return "".join(out)


def act_balance_note(cold_start: dict[str, Any]) -> str:
    """One line per game: the teacher's most frequent action share and the SFT set's after balancing.
    "" when the cold start did not balance (`sft.act_balance.enabled: false`, or an older run)."""
    balance = cold_start.get("act_balance") or {}
    lines = []
    for game, entry in sorted(balance.items()):
        teacher, kept = entry.get("teacher", {}), entry.get("kept", {})
        top = (teacher.get("most_common") or [["-", 0]])[0][0]
        kept_top = (kept.get("most_common") or [["-", 0]])[0][0]
        share, kept_share = float(teacher.get("top_share") or 0), float(kept.get("top_share") or 0)
        lines.append(f"<p class='note'>{e(game)} act examples: the teacher chose {teacher.get('actions', 0)} "
                     f"actions in {teacher.get('examples', 0)} examples, most often {e(str(top))} "
                     f"({share:.0%}); balanced, {kept.get('examples', 0)} kept, most often "
                     f"{e(str(kept_top))} ({kept_share:.0%}, bound {float(entry.get('bound') or 0):.0%})</p>")
    return "".join(lines)
