"""The skill analysis (`coplay.report.skill_analysis`) drawn three ways: rich text and JSON for
`coplay bank report`, and HTML (charts, tables) for the bank report page and the run report's "Skill
analysis" section. Only presentation lives here; every number comes from the typed result.

rich and matplotlib are imported inside the functions (through `coplay.report.charts`). Never imports ray or
torch.
"""

from __future__ import annotations

import dataclasses
import html
import io
import json

from coplay.report.data import RunData
from coplay.report.skill_analysis import (
    BankAnalysis,
    SkillAnalysis,
    SkillRecord,
    SkillSummary,
    load_skill_analysis,
)

e = html.escape
TOP = 10  # skills in the "most used" table
NOTE = (
    "discovered: skills created by materialize, merge or split (inherited: in the first version without such "
    "an operation, e.g. a bank from another run); absorbed: skills that disappeared into a merge or a split; "
    "uses: times the decision agent ran the skill (a run of consecutive steps with it active), episodes: the "
    "policy's episodes in which it ran; duration: steps per use; switches: uses whose skill differs from the "
    "previous use's in the same episode; SKILL: SWITCH answers: the act answers asking to leave the active "
    "skill; later changes: refinements after the skill was made; bank segments: segments of trajectories "
    "the bank labelled with the skill. docs/skill-analysis.md says more.")


def _num(value: float | int | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def summary_rows(s: SkillSummary) -> list[tuple[str, str]]:
    """The run's figures of one bank, as (label, value) pairs (the same words in text and HTML)."""
    return [
        ("bank versions", _num(s.versions)),
        ("skills active in the newest version", _num(s.active)),
        ("skills discovered (materialize, merge, split)", f"{s.discovered} (+{s.inherited} inherited)"),
        ("skills absorbed by merges", _num(s.absorbed_by_merge)),
        ("skills absorbed by splits", _num(s.absorbed_by_split)),
        ("skills retired / evicted", f"{s.retired} / {s.evicted}"),
        ("policy episodes in the shards", _num(s.episodes)),
        ("mean episodes per skill", _num(s.mean_episodes_per_skill)),
        ("mean skill duration (steps per use)", _num(s.mean_skill_duration)),
        ("mean segment duration (bank, newest version)", _num(s.bank_mean_duration)),
        ("skill switches per episode", _num(s.switches_per_episode)),
        ("SKILL: SWITCH answers per episode", _num(s.switch_requests_per_episode)),
    ]


def ended_text(skill: SkillRecord) -> str:
    """How a skill left the bank: `merged into s4 @it1`, `split into s5, s6 @it2`, `retired @it2`, ..."""
    into = ", ".join(skill.ended_into)
    how = {"merge": f"merged into {into}", "split": f"split into {into}", "retire": "retired",
           "evict": "evicted", "unrecorded": "gone (no operation recorded)"}
    if not skill.ended_by:
        return "in the bank"
    return f"{how.get(skill.ended_by, skill.ended_by)} @it{skill.ended_iteration}"


def made_text(skill: SkillRecord) -> str:
    parents = "+".join(skill.parents)
    return f"{skill.made_by}{' ' + parents if parents else ''} @it{skill.born_iteration}"


def _shares(tags: dict[str, int], top: int = 3) -> str:
    total = sum(tags.values())
    ranked = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return ", ".join(f"{t} {c / total:.0%}" for t, c in ranked) if total else "-"


VERSION_COLUMNS = ("version", "iteration", "active", "discovered", "discovered total", "absorbed (merge)",
                   "absorbed (split)", "retired", "evicted", "refined", "not applied", "top tags")
PLAY_COLUMNS = ("iteration", "episodes", "uses", "steps per use", "switches / episode",
                "SWITCH answers / episode", "uses ended by", "top intention tags")
SKILL_COLUMNS = ("id", "name", "made by", "later changes", "left the bank", "uses", "episodes", "steps",
                 "bank segments", "top tags")


def _version_cells(bank: BankAnalysis) -> list[list[str]]:
    return [[f"v{r.version}", str(r.iteration), str(r.active), str(r.discovered), str(r.discovered_total),
             str(r.absorbed_by_merge), str(r.absorbed_by_split), str(r.retired), str(r.evicted),
             str(r.refined), str(r.not_applied), _shares(r.tags)] for r in bank.versions]


def _play_cells(bank: BankAnalysis) -> list[list[str]]:
    return [[str(r.iteration), str(r.episodes), str(r.uses), _num(r.mean_duration),
             _num(r.switches_per_episode), _num(r.switch_requests_per_episode),
             ", ".join(f"{k} {v}" for k, v in r.ended.items()) or "-", _shares(r.tags)] for r in bank.play]


def _skill_cells(skills: list[SkillRecord]) -> list[list[str]]:
    return [[s.id, s.name or "-", made_text(s), "; ".join(x.text() for x in s.lineage[1:]) or "-",
             ended_text(s), str(s.play_uses), str(s.play_episodes), str(s.play_steps), str(s.bank_uses),
             _shares(s.tags)]
            for s in skills]


def _used(bank: BankAnalysis, top: int) -> list[SkillRecord]:
    return [s for s in bank.most_used(top) if s.play_uses or s.bank_uses]


def analysis_text(analysis: SkillAnalysis, top: int = TOP) -> str:
    """Rich tables per bank: the summary, versions, the policy's play per iteration, the most used skills and
    every skill's lineage."""
    from rich.console import Console
    from rich.table import Table

    console = Console(record=True, width=160, file=io.StringIO())

    def table(title: str, columns: tuple[str, ...], rows: list[list[str]], caption: str = "") -> None:
        t = Table(title=title, caption=caption or None)
        for col in columns:
            t.add_column(col, overflow="fold")
        for row in rows:
            t.add_row(*row)
        console.print(t)

    for key, bank in analysis.banks.items():
        console.print(f"[bold]skill analysis of bank {key}[/]")
        for label, value in summary_rows(bank.summary):
            console.print(f"  {label}: {value}")
        table(f"bank {key}: versions", VERSION_COLUMNS, _version_cells(bank))
        if bank.play:
            table(f"bank {key}: the policy's skill use per iteration", PLAY_COLUMNS, _play_cells(bank))
        table(f"bank {key}: most used skills", SKILL_COLUMNS, _skill_cells(_used(bank, top)))
        table(f"bank {key}: every skill's lineage", SKILL_COLUMNS, _skill_cells(bank.skills), NOTE)
    for problem in analysis.problems:
        console.print(f"problem: {problem}", markup=False)
    if not analysis.banks:
        console.print("no banks to analyse")
    return console.export_text()


def analysis_json(analysis: SkillAnalysis) -> str:
    """The whole result as JSON (`coplay bank report --json`), field names as in the dataclasses."""
    return json.dumps(dataclasses.asdict(analysis), indent=1, ensure_ascii=False, sort_keys=True)


def _table_html(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<div class='wide'><table class='skills'><tr>{head}</tr>{body}</table></div>"


def _figure(chart_id: str, svg: str, caption: str) -> str:
    return f"<figure class='chart' id='{e(chart_id)}'>{svg}<figcaption>{e(caption)}</figcaption></figure>"


def _charts(bank: BankAnalysis) -> str:
    """Skills per version (active, discovered and absorbed so far), the intention-tag shares of the bank's
    skills per version, and the policy's skill use per iteration (when the shards hold its episodes)."""
    from coplay.report.charts import Series, line_chart, stacked_bars

    slug = bank.key.replace("/", "-")
    versions = [float(r.version) for r in bank.versions]
    absorbed, total = [], 0.0
    for r in bank.versions:
        total += r.absorbed_by_merge + r.absorbed_by_split
        absorbed.append(total)
    out = [_figure(f"chart-skills-{slug}-count", line_chart(
        f"skills-{slug}-count", f"{bank.key}: skills per bank version", "bank version", "skills",
        [Series("active", versions, [float(r.active) for r in bank.versions]),
         Series("discovered so far", versions, [float(r.discovered_total) for r in bank.versions]),
         Series("absorbed so far (merge, split)", versions, absorbed)], integer_y=True),
        "Skills in the bank at each version, skills created so far (materialize, merge, split; inherited "
        "ones included), and skills that disappeared into a merge or a split so far.")]
    tags = sorted({t for r in bank.versions for t in r.tags})
    if tags:
        shares = {t: [r.tags.get(t, 0) / (sum(r.tags.values()) or 1) for r in bank.versions] for t in tags}
        out.append(_figure(f"chart-skills-{slug}-tags", stacked_bars(
            f"skills-{slug}-tags", f"{bank.key}: intention tags of the bank's skills", "bank version",
            "share", [f"v{r.version}" for r in bank.versions], shares),
            "Share of each intention tag among the instances of the skills in each bank version (the skills' "
            "tag counts): what the bank's skills are for, over the run."))
    if bank.play:
        its = [float(r.iteration) for r in bank.play]
        out.append(_figure(f"chart-skills-{slug}-play", line_chart(
            f"skills-{slug}-play", f"{bank.key}: the policy's skill use", "iteration",
            "per use / per episode",
            [Series("steps per use", its, [r.mean_duration for r in bank.play]),
             Series("switches per episode", its, [r.switches_per_episode for r in bank.play]),
             Series("SKILL: SWITCH answers per episode", its,
                    [r.switch_requests_per_episode for r in bank.play])]),
            "From the policy's own episodes of each iteration: mean steps a skill stays active per use, "
            "changes of skill per episode, and act answers asking to switch per episode."))
    return "".join(out)


def bank_analysis_html(bank: BankAnalysis, top: int = TOP) -> str:
    """One bank's part of the analysis: the figures, the charts, and the tables."""
    rows = "".join(f"<tr><td>{e(label)}</td><td>{e(value)}</td></tr>"
                   for label, value in summary_rows(bank.summary))
    parts = [f"<h3>{e(bank.key)}</h3><table class='skill-summary'>{rows}</table>", _charts(bank),
             f"<h4>Versions</h4>{_table_html(VERSION_COLUMNS, _version_cells(bank))}"]
    if bank.play:
        parts.append("<h4>The policy's skill use per iteration</h4>"
                     f"{_table_html(PLAY_COLUMNS, _play_cells(bank))}")
    parts += [f"<h4>Most used skills</h4>{_table_html(SKILL_COLUMNS, _skill_cells(_used(bank, top)))}",
              f"<h4>Every skill's lineage</h4>{_table_html(SKILL_COLUMNS, _skill_cells(bank.skills))}"]
    return "".join(parts)


def analysis_html(analysis: SkillAnalysis) -> str:
    """The analysis of every bank, with the note on what the figures mean and any file that could not be
    read."""
    if not analysis.banks:
        return "<p class='none'>No skill banks in this run folder (banks/ is empty).</p>"
    problems = "".join(f"<p class='problem'>{e(p)}</p>" for p in analysis.problems)
    body = "".join(bank_analysis_html(bank) for bank in analysis.banks.values())
    return f"<p class='note'>{e(NOTE)}</p>{problems}{body}"


def run_report_section(data: RunData) -> str:
    """The run report's "Skill analysis" section, from the bank versions the report already read and the
    run's shards."""
    return analysis_html(load_skill_analysis(data.root, banks=data.banks))
