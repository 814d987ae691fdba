"""The sections of the run report, each an HTML fragment: learning curves, reward parts, invalid-action
rates, learner figures, skill banks, evaluation tables, throughput. Charts are inline SVG (charts.py) wrapped
in `<figure class="chart">`, which the page's check script verifies drew. Never imports ray or torch.
"""

from __future__ import annotations

import html
import re
import statistics
from typing import Any

from coplay.eval.stats import summarize, wilson_interval
from coplay.report import charts
from coplay.report.action_spread import act_balance_note, probe_spread
from coplay.report.data import (
    EvalFile,
    RunData,
    bank_operation_counts,
    bank_size_series,
    eval_overlays,
    games_of,
    league_panels,
    pooled_seat_scores,
    rate_series,
    reward_part_panels,
    score_series,
    throughput_rows,
    timing_series,
    train_panels,
)
from coplay.skills.schema import BankError

e = html.escape
_BODY = re.compile(r"<body[^>]*>(.*)</body>", re.DOTALL | re.IGNORECASE)
_H1 = re.compile(r"<h1[^>]*>.*?</h1>", re.DOTALL | re.IGNORECASE)


def figure(chart_id: str, svg: str, caption: str) -> str:
    return f"<figure class='chart' id='{e(chart_id)}'>{svg}<figcaption>{e(caption)}</figcaption></figure>"


def _none(text: str) -> str:
    return f"<p class='none'>{e(text)}</p>"


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1000:
        return str(int(value))
    return f"{value:.{digits}f}" if isinstance(value, float) else e(str(value))


def learning_curves(data: RunData) -> str:
    its = [r["iteration"] for r in data.iterations]
    xlim = (min(its) - 0.2, max(its) + 0.2) if its else None
    out = []
    for game in games_of(data.iterations, data.evals):
        series, levels = eval_overlays(data.evals, game)
        train = score_series(data.iterations, game)
        lines = ([train] if train else []) + series
        if not lines and not levels:
            continue
        out.append(figure(f"chart-score-{game}", charts.line_chart(
            f"score-{game}", f"{game}: score per iteration", "iteration", "score", lines, levels, xlim=xlim),
            f"{game}: circles, solid line: mean score of the policy's own seats in training rollouts per "
            f"iteration, shaded 95% t-interval; squares (joined by a dotted line when there are several): "
            f"evaluations on seeds.eval at an iteration; dashed horizontal lines: evaluations made once, "
            f"such as the bots on the same protocol."))
    return "".join(out) or _none("No scores yet: metrics.jsonl has no iteration records and eval/ has no "
                                 "results.")


def reward_parts(data: RunData) -> str:
    panels = reward_part_panels(data.iterations)
    if not panels:
        return _none("No reward parts recorded.")
    return figure("chart-reward-parts",
                  charts.small_multiples("reward-parts", "mean reward per adapter", "iteration", panels),
                  "Mean reward of each adapter's samples per iteration (act: return-to-go at each step; "
                  "retrieve, segment, contract, curator, propose: docs/rewards.md).")


def rates(data: RunData) -> str:
    series = rate_series(data.iterations)
    if not series:
        return _none("No invalid-action rates recorded.")
    top = max([v for s in series for v in s.y if v is not None] + [0.05])
    return figure("chart-invalid",
                  charts.line_chart("invalid", "invalid actions and parse errors", "iteration",
                                    "share of steps", series, ylim=(0, min(1.0, top * 1.15))),
                  "Share of the policy's steps whose action was illegal (the game's fallback was applied) or "
                  "whose completion did not parse.")


def learner(data: RunData) -> str:
    panels = train_panels(data.iterations)
    if not panels:
        return _none("No learner steps recorded yet.")
    return figure("chart-learner",
                  charts.small_multiples("learner", "learner figures per adapter", "iteration", panels),
                  "GRPO loss, policy-gradient loss, KL to the base model, clip fraction and gradient norm of "
                  "each adapter trained in the iteration's learner step.")


def bank_report_body(full_page: str) -> str:
    """The inside of the bank report page's `<body>` (coplay.report.bank), without its page title, to embed
    as a section."""
    match = _BODY.search(full_page)
    if match is None:
        raise ValueError("bank report: no <body> element in the page coplay.report.bank produced")
    return _H1.sub("", match.group(1), count=1)


def banks(data: RunData) -> str:
    if not data.banks:
        return _none("No skill banks in this run folder (banks/ is empty).")
    from coplay.report.bank import bank_report_html

    versions, ops = bank_operation_counts(data.banks)
    parts = [figure("chart-bank-size",
                    charts.line_chart("bank-size", "skills per bank version", "bank version", "skills",
                                      bank_size_series(data.banks), integer_y=True),
                    "Number of skills in each bank (per game, Avalon side or Diplomacy power) at each "
                    "version.")]
    if ops:
        parts.append(figure("chart-bank-ops",
                            charts.stacked_bars("bank-ops", "bank operations per version", "bank version",
                                                "operations", versions, ops, integer_y=True),
                            "Operations made for each bank version, summed over banks: applied ones by type, "
                            "and proposals not applied (curator verdict or failed checks)."))
    else:
        parts.append(_none("No bank operations recorded."))
    parts.append(skill_use_table(data))
    try:
        body = bank_report_body(bank_report_html(data.root, analysis=False))
        parts.append(f"<div class='bank-report'>{body}</div>")
    except BankError as exc:
        parts.append(f"<p class='problem'>bank report not rendered: {e(str(exc))}</p>")
    return "".join(parts)


def skill_use_table(data: RunData) -> str:
    """Per iteration: how the policy used the bank (`skill_use` of the metrics line) and what maintenance
    did with the curator's verdicts (applied, gated by the quality gate, the curator's agreement)."""
    rows = []
    for r in data.iterations:
        use, kept = r.get("skill_use"), r.get("maintenance") or {}
        if not use:
            continue
        ended, agreement = use.get("ended", {}), kept.get("curator_agreement") or {}
        share = use["steps_with_skill"] / use["steps"] if use.get("steps") else None
        cells = [r.get("iteration"), use.get("uses"), f"{share:.0%}" if share is not None else "-",
                 ended.get("success", 0), ended.get("abort", 0), ended.get("switch", 0),
                 sum((kept.get("applied") or {}).values()), sum((kept.get("gated") or {}).values()),
                 "-" if agreement.get("rate") is None
                 else f"{agreement['rate']:.0%} of {agreement['judged']}"]
        rows.append("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in cells) + "</tr>")
    if not rows:
        return _none("No skill use recorded (runs before skill_use was in the metrics line).")
    head = ("<tr><th>iteration</th><th>skills picked</th><th>steps under a skill</th><th>succeeded</th>"
            "<th>aborted</th><th>switched</th><th>operations applied</th><th>gated</th>"
            "<th>curator agrees with the measure</th></tr>")
    return (f"<table class='skill-use'>{head}{''.join(rows)}</table><p class='caption'>Skill use by the "
            "policy's own seats per iteration (a use ends in success, abort, switch, or at another skill or "
            "the episode's end), and the bank update's operations: applied, approved but refused by the "
            "quality gate, and how often the curator's own verdicts agreed with the measured held-out "
            "quality change.</p>")


def _score_table(ev: EvalFile) -> str:
    rows = []
    for game, entry in sorted(ev.results.items()):
        s = entry.get("score", {})
        rows.append(f"<tr><td>{e(game)}</td><td>{_fmt(s.get('n'))}</td><td>{_fmt(s.get('mean'))}</td>"
                    f"<td>[{_fmt(s.get('ci_low'))}, {_fmt(s.get('ci_high'))}]</td>"
                    f"<td>[{_fmt(s.get('boot_low'))}, {_fmt(s.get('boot_high'))}]</td>"
                    f"<td>{_fmt(s.get('median'))}</td>"
                    f"<td>{_fmt(s.get('min'))}</td><td>{_fmt(s.get('max'))}</td></tr>")
    head = ("<tr><th>game</th><th>n</th><th>mean</th><th>95% CI (t)</th><th>95% CI (bootstrap)</th>"
            "<th>median</th><th>min</th><th>max</th></tr>")
    return f"<table class='eval'>{head}{''.join(rows)}</table>"


def _extra_tables(ev: EvalFile) -> str:
    out = []
    for game, entry in sorted(ev.results.items()):
        if "win_rate" in entry:
            rows = "".join(f"<tr><td>{e(k)}</td><td>{_fmt(w.get('n'))}</td><td>{_fmt(w.get('rate'))}</td>"
                           f"<td>[{_fmt(w['ci95'][0])}, {_fmt(w['ci95'][1])}]</td></tr>"
                           for k, w in entry["win_rate"].items())
            out.append(f"<h4>{e(game)} win rates</h4><table><tr><th>group</th><th>n</th><th>rate</th>"
                       f"<th>95% CI (Wilson)</th></tr>{rows}</table>")
        if "per_power" in entry:
            rows = "".join(f"<tr><td>{e(p)}</td><td>{_fmt(s.get('n'))}</td><td>{_fmt(s.get('mean'))}</td>"
                           f"<td>[{_fmt(s.get('ci_low'))}, {_fmt(s.get('ci_high'))}]</td></tr>"
                           for p, s in entry["per_power"].items())
            out.append(f"<h4>{e(game)} per power</h4><table><tr><th>power</th><th>n</th><th>mean</th>"
                       f"<th>95% CI (t)</th></tr>{rows}</table>")
    return "".join(out)


def league(data: RunData) -> str:
    """The league's ratings over iterations and its latest table; the learner's seats per role."""
    panels = league_panels(data.iterations)
    if not panels:
        return _none("No league ratings (no multi-seat game played, or rollout.selfplay.league.enabled "
                     "is false).")
    parts = [figure("chart-league", charts.small_multiples("league", "OpenSkill mu per pool member",
                                                           "iteration", panels),
                    "Rating mean (mu) of every pool member after each iteration's self-play and evaluation "
                    "games; act@v<n> is a policy version, which starts from its predecessor's rating.")]
    last = next(r for r in reversed(data.iterations) if r.get("league"))
    for game, table in last["league"].items():
        rows = "".join(f"<tr><td>{e(m)}</td><td>{_fmt(v.get('mu'))}</td><td>{_fmt(v.get('sigma'))}</td>"
                       f"<td>{_fmt(v.get('ordinal'))}</td><td>{_fmt(v.get('games'))}</td></tr>"
                       for m, v in table.items())
        parts.append(f"<h3>{e(game)} after iteration {last['iteration']}</h3><table><tr><th>member</th>"
                     f"<th>mu</th><th>sigma</th><th>ordinal (mu - 3 sigma)</th><th>games</th></tr>{rows}"
                     "</table>")
    parts += [_seat_table(game, roles) for game, roles in pooled_seat_scores(data.iterations).items()]
    return "".join(parts)


def _seat_table(game: str, roles: dict[str, list[float]]) -> str:
    """The learner's results per role over the run: Avalon win rate (Wilson 95%), else mean score (t 95%;
    Diplomacy: supply centres)."""
    rows = []
    for role, scores in sorted(roles.items()):
        if game == "avalon":
            wins = sum(1 for s in scores if s > 0)
            low, high = wilson_interval(wins, len(scores))
            cell = f"{wins / len(scores):.2f} [{low:.2f}, {high:.2f}]"
        else:
            s = summarize(scores)
            cell = f"{s.mean:.2f} [{s.ci_low:.2f}, {s.ci_high:.2f}]"
        rows.append(f"<tr><td>{e(role)}</td><td>{len(scores)}</td><td>{cell}</td></tr>")
    what = "win rate [95% Wilson]" if game == "avalon" else "mean score [95% t]"
    return (f"<h3>{e(game)}: the learner per role, all iterations</h3><table><tr><th>role</th>"
            f"<th>episodes</th><th>{what}</th></tr>{''.join(rows)}</table>")


def probes(data: RunData) -> str:
    """The per-decision probe of each probed iteration (`eval/probe-it<k>.json`): the model's mean regret
    beside the random and expert bots' on the same positions (docs/evaluation.md)."""
    if not data.probes:
        return _none("No probe in eval/ (probe.every = 0, or no single-player game).")
    rows = []
    for ev in sorted(data.probes, key=lambda p: p.iteration or 0):
        for game, entry in sorted(ev.results.items()):
            cells = []
            for who in ("model", "random", "expert"):
                s = entry.get(who, {})
                r = s.get("regret", {})
                cells.append(f"<td>{_fmt(s.get('mean_regret'))} [{_fmt(r.get('ci_low'))}, "
                             f"{_fmt(r.get('ci_high'))}]</td>")
            model = entry.get("model", {})
            separate = "yes" if entry.get("bots_separate") else "no: not a result"
            rows.append(f"<tr><td>{_fmt(ev.iteration)}</td><td>{e(game)}</td>{''.join(cells)}"
                        f"<td>{_fmt(model.get('best_share'))}</td><td>{_fmt(model.get('invalid_share'))}</td>"
                        f"<td>{e(separate)}</td></tr>")
    head = ("<tr><th>iteration</th><th>game</th><th>model regret [95% CI]</th><th>random bot</th>"
            "<th>expert bot</th><th>model best share</th><th>model invalid share</th>"
            "<th>bots separate</th></tr>")
    return f"<table class='eval'>{head}{''.join(rows)}</table>{probe_spread(data.probes)}"


def evaluations(data: RunData) -> str:
    if not data.evals:
        return _none("No evaluations in eval/ (run `coplay eval`).")
    out = []
    for ev in data.evals:
        meta = ", ".join(f"{k}={v}" for k, v in sorted(ev.meta.items()) if isinstance(v, str | int | float))
        out.append(f"<h3>{e(ev.name)}</h3><p class='meta'>{e(meta)}</p>{_protocol_check(ev)}"
                   f"{_score_table(ev)}{_extra_tables(ev)}")
    return "".join(out)


def _protocol_check(ev: EvalFile) -> str:
    """The ruler's verdict recorded in an evaluation's meta (coplay.eval.ruler): one line per game, the
    failed ones labelled as not a result."""
    from coplay.eval.ruler import FAILED_LABEL

    games = (ev.meta.get("protocol_check") or {}).get("games") or {}
    lines = []
    for game, check in sorted(games.items()):
        if isinstance(check, dict):
            verdict = "protocol check passed" if check.get("passed") else FAILED_LABEL
            cls = "meta" if check.get("passed") else "problem"
            lines.append(f"<p class='{cls}'>{e(game)}: {e(verdict)} ({e(str(check.get('reason', '')))})</p>")
    return "".join(lines)


def _median(values: list[Any]) -> float | None:
    nums = [v for v in values if isinstance(v, int | float)]
    return statistics.median(nums) if nums else None


def throughput(data: RunData) -> str:
    rows = throughput_rows(data.iterations)
    if not rows:
        return _none("No iterations recorded yet.")
    series = timing_series(data.iterations)
    parts = []
    if series:
        parts.append(figure("chart-timings",
                            charts.line_chart("timings", "seconds per iteration", "iteration", "seconds",
                                              series),
                            "Wall time of each iteration and of its timed parts (sync, rollouts, the "
                            "engines' generation, env stepping, bank work, the learner step). With staleness "
                            ">= 1 bank work and training overlap rollouts, so the parts can add up to more "
                            "than the iteration."))
    cols = list(rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_fmt(r[c], 1)}</td>" for c in cols) + "</tr>" for r in rows)
    median = "<tr class='median'><td>median</td>" + "".join(
        f"<td>{_fmt(_median([r[c] for r in rows]), 1)}</td>" for c in cols[1:]) + "</tr>"
    heads = "".join(f"<th>{e(c).replace('_', '_<wbr>')}</th>" for c in cols)  # long names may wrap
    parts.append(f"<div class='wide'><table class='throughput'><tr>{heads}</tr>"
                 f"{body}{median}</table></div>"
                 "<p class='note'>trained_tokens_per_s = tokens the learner trained on in the iteration's "
                 "step / the iteration's wall time (benchmarks/README.md defines it per GPU).</p>")
    return "".join(parts)


def cold_start(data: RunData) -> str:
    """The cold start's SFT per adapter: examples, batches, epochs, and the loss before and after."""
    if data.cold_start is None:
        return _none("No cold-start record in metrics.jsonl.")
    record = data.cold_start.get("cold_start", {})
    sft = {a: v for a, v in (record.get("sft") or {}).items() if isinstance(v, dict) and "first_loss" in v}
    if not sft:
        return _none("No SFT at the cold start (sft.enabled: false), or it recorded no losses.")
    cols = ("examples", "batches", "epochs", "first_loss", "last_loss")
    rows = "".join(f"<tr><td>{e(a)}</td>" + "".join(f"<td>{_fmt(v.get(c), 3)}</td>" for c in cols) + "</tr>"
                   for a, v in sorted(sft.items()))
    seconds = record.get("sft_seconds")
    took = f" SFT took {seconds:.0f} s." if isinstance(seconds, int | float) else ""
    return (f"<table class='sft'><tr><th>adapter</th>{''.join(f'<th>{c}</th>' for c in cols)}</tr>{rows}"
            f"</table><p class='note'>Supervised fine-tuning of every adapter on teacher data before the "
            f"first iteration: cross-entropy of the teacher's answers, averaged over the first and the last "
            f"batch.{took}</p>{act_balance_note(record)}")


def problems(data: RunData) -> str:
    if not data.problems:
        return ""
    return "<section id='problems'><h2>Files that could not be read</h2><ul>" + "".join(
        f"<li>{e(p)}</li>" for p in data.problems) + "</ul></section>"
