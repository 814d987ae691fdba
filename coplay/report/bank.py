"""The bank report: a terminal table (`coplay bank show RUN_DIR [--game G] [--version V]`) and an HTML page
(`coplay bank report RUN_DIR`, also a section of the run report) with each skill's protocol, contract, stats
and lineage, the operations of every version, charts of bank size and mean pass rate over versions
(`coplay.report.charts`, inline SVG), and the skill analysis (`coplay.report.skill_views`). The bank logic
stays in `coplay.skills`, which draws nothing.

rich and matplotlib are imported inside the functions. Never imports ray or torch.
"""

from __future__ import annotations

import html
import io
from pathlib import Path

from coplay.files import write_bytes_atomic
from coplay.report.chance import heldout_vs_chance, quality_vs_chance, skill_vs_chance
from coplay.runs import RunDir
from coplay.skills.schema import Bank, BankError, bank_keys, bank_versions, load_bank
from coplay.skills.tasking import apply_run_tasking

COLUMNS = ("id", "name", "contract", "contract held out", "preconditions", "success", "uses", "use pass",
           "steps", "last it", "v")
COLUMNS_NOTE = (
    "The title's pass rate checks each skill's contract (the facts it promises to add or remove) on "
    "segments of trajectories the bank did not learn from; its chance level is the same check on random "
    "windows of the same lengths, and a rate whose 95% interval does not clear it is marked 'not above "
    "chance': that check cannot tell this bank's contracts from ones that hold whatever happens. Columns: "
    "contract = the literals it promises; contract held out = the title's check per skill (segments where it "
    "passed, beside its own chance level); preconditions / success = when it can start / when it is done; "
    "uses = times the decision agent ran it; use pass = share of those runs that reached its success "
    "condition (no chance level is measured for it); steps = mean steps per use; last it = iteration of its "
    "last use; v = the skill's own version.")


def _open(run_dir: str | Path | RunDir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))


def _keys_for(run: RunDir, game: str | None) -> list[str]:
    keys = bank_keys(run)
    if game is not None:
        keys = [k for k in keys if k == game or k.split("/", 1)[0] == game]
    if not keys:
        raise BankError(f"{run.root / 'banks'}: no banks{f' for game {game!r}' if game else ''}; "
                        f"keys on disk: {bank_keys(run)}")
    return keys


def show_bank(run_dir: str | Path | RunDir, game: str | None = None, version: int | None = None) -> str:
    """The skills of each bank (newest version unless `version`) as text tables."""
    from rich.console import Console
    from rich.table import Table

    run = _open(run_dir)
    console = Console(record=True, width=160, file=io.StringIO())
    for key in _keys_for(run, game):
        bank = apply_run_tasking(run.root, load_bank(run, key, version))  # with the curriculum's statistics
        m = bank.metrics
        table = Table(title=f"bank {key} v{bank.version} (iteration {bank.iteration}): "
                            f"{len(bank.skills)} skills; contracts on held-out segments: "
                            f"{heldout_vs_chance(m).text()} pass, coverage {m.get('coverage', 0):.0%}",
                      caption=COLUMNS_NOTE)
        for col in COLUMNS:
            table.add_column(col, overflow="fold")
        for skill in sorted(bank.skills.values(), key=lambda s: int(s.id[1:]) if s.id[1:].isdigit() else 0):
            st = skill.stats
            table.add_row(skill.id, skill.name, ", ".join(skill.contract.literals),
                          _skill_held_out(bank, skill.id), skill.preconditions,
                          skill.success, str(st.uses), f"{st.pass_rate:.0%}", f"{st.mean_duration:.1f}",
                          str(st.last_used), str(skill.version))
        console.print(table)
        for skill in (s for s in bank.skills.values() if s.tasking.usage.proposed):
            console.print(f"curriculum tasks of {skill.id}: {skill.tasking.summary()}", markup=False)
        if bank.operations:
            console.print("operations: " + "; ".join(
                f"{op['op']} {op['targets'] or op['new']} -> {op['verdict']}"
                f"{'' if op['applied'] else ' (not applied)'}"
                for op in bank.operations))
    return console.export_text()


def _history(run: RunDir, key: str) -> list[Bank]:
    return [load_bank(run, key, v) for v in bank_versions(run, key)]


def _charts(key: str, history: list[Bank]) -> str:
    """Bank size and mean pass rates over versions (inline SVG through `coplay.report.charts`)."""
    from coplay.report.charts import Series, line_chart

    versions = [float(b.version) for b in history]
    slug = key.replace("/", "-")
    size = line_chart(f"bank-{slug}-size", f"{key}: bank size", "version", "skills",
                      [Series("skills", versions, [float(len(b.skills)) for b in history])], integer_y=True)
    rates = [Series(label, versions, [float(b.metrics.get(metric, 0.0)) for b in history])
             for label, metric in (("held-out", "heldout_pass_rate"),
                                   ("chance (shuffled)", "shuffled_pass_rate"),
                                   ("skill stats", "mean_skill_pass_rate"))]
    passes = line_chart(f"bank-{slug}-pass", f"{key}: mean pass rate", "version", "pass rate", rates,
                        ylim=(0.0, 1.05))
    return f"<div class='bank-charts'>{size}{passes}</div>"


def _quality_html(metrics: dict) -> str:
    """The bank's quality figures, each beside its chance level; red and explained when the held-out
    pass rate does not clear it (`coplay.report.chance`)."""
    held = heldout_vs_chance(metrics)
    quality, at_chance = quality_vs_chance(metrics)
    chance_q = f" (chance {at_chance:.3f})" if at_chance is not None else ""
    where = (" - measured on the trajectories the bank learned from (too few to hold any out)"
             if metrics.get("heldout_is_train") else "")
    line = (f"contracts on held-out segments: {html.escape(held.text(1))} pass; coverage "
            f"{metrics.get('coverage', 0):.1%}; quality {quality:.3f}{chance_q}{where}")
    if held.beats is False:
        return (f"<p class='problem'>{line}. The contracts pass about as often on random windows as on the "
                f"skills' own segments: this check cannot tell this bank from one whose contracts hold "
                f"whatever the player does.</p>")
    return f"<p>{line}</p>"


def _skill_held_out(bank: Bank, skill_id: str) -> str:
    entry = (bank.metrics.get("per_skill_heldout") or {}).get(skill_id)
    if not entry:
        return "no held-out segment"
    return f"{int(entry.get('passes', 0))} of {int(entry.get('n', 0))}: {skill_vs_chance(entry).text()}"


def _skill_html(bank: Bank) -> str:
    e = html.escape
    rows = []
    for skill in bank.skills.values():
        st = skill.stats
        lineage = "; ".join(f"{x.get('op')} {x.get('parents', [])} @it{x.get('iteration')}"
                            for x in skill.lineage)
        rows.append(
            f"<details><summary><b>{e(skill.id)}</b> {e(skill.name)} - {e(skill.summary)}</summary><ul>"
            f"<li>plan: <ol>{''.join(f'<li>{e(p)}</li>' for p in skill.plan)}</ol></li>"
            f"<li>preconditions: <code>{e(skill.preconditions)}</code>; "
            f"success: <code>{e(skill.success)}</code>; "
            f"abort: <code>{e(skill.abort)}</code> ({e(skill.protocol_source)})</li>"
            f"<li>contract: add {e(', '.join(skill.contract.add))}; del {e(', '.join(skill.contract.dele))}; "
            f"n={skill.contract.n}; support {e(str(skill.contract.support))}; held-out segments where it "
            f"passed: {e(_skill_held_out(bank, skill.id))}</li>"
            f"<li>stats: {st.uses} uses, success {st.pass_rate:.0%} (no chance level measured), reward "
            f"{st.mean_reward:.3g}, "
            f"{st.mean_duration:.1f} steps, last used it{st.last_used}; tags {e(str(skill.tags))}</li>"
            f"<li>curriculum tasks: {e(skill.tasking.summary())}</li>"
            f"<li>version {skill.version}; lineage: {e(lineage)}</li></ul></details>")
    return "\n".join(rows) or "<p>(no skills)</p>"


def _operations_html(history: list[Bank]) -> str:
    e = html.escape
    rows = []
    for bank in history:
        for op in bank.operations:
            rows.append(f"<tr><td>v{bank.version}</td><td>{e(op['op'])}</td>"
                        f"<td>{e(', '.join(op['targets']))}</td>"
                        f"<td>{e(', '.join(op['new']))}</td><td>{e(str(op['verdict']))}</td>"
                        f"<td>{'yes' if op['applied'] else 'no'}</td>"
                        f"<td><code>{e(str(op.get('evidence', {}))[:300])}</code></td></tr>")
    head = ("<tr><th>version</th><th>op</th><th>targets</th><th>new</th><th>verdict</th><th>applied</th>"
            "<th>evidence</th></tr>")
    return f"<table>{head}{''.join(rows)}</table>" if rows else "<p>(no operations)</p>"


def bank_report_html(run_dir: str | Path | RunDir, analysis: bool = True) -> str:
    """The report page as a string (the run report embeds it as a section, with `analysis=False`: it shows
    the skill analysis in a section of its own). With `analysis`, the page ends with the skill analysis
    (`coplay.report.skill_analysis`)."""
    run = _open(run_dir)
    sections = []
    for key in _keys_for(run, None):
        history = _history(run, key)
        latest = apply_run_tasking(run.root, history[-1])
        m = latest.metrics
        sections.append(
            f"<h2>{html.escape(key)} - v{latest.version}, {len(latest.skills)} skills</h2>"
            f"{_quality_html(m)}{_charts(key, history)}"
            f"<h3>Skills</h3>{_skill_html(latest)}<h3>Operations per version</h3>{_operations_html(history)}")
    if analysis:
        from coplay.report.skill_analysis import load_skill_analysis
        from coplay.report.skill_views import analysis_html

        body = analysis_html(load_skill_analysis(run))
        sections.append(f"<h2 id='skill-analysis'>Skill analysis</h2>{body}")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto}"
             "table{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ccc;padding:2px 6px}code{font-size:12px}"
             "figure{margin:8px 0}figure svg{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}"
             ".note{color:#666;font-size:13px}.problem{color:#b00}div.wide{max-width:100%;overflow-x:auto}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>coplay skill banks</title>"
            f"<style>{style}</style></head><body><h1>Skill banks of {html.escape(str(run.root))}</h1>"
            f"{''.join(sections)}</body></html>")


def write_bank_report(run_dir: str | Path | RunDir) -> Path:
    """Write `bank_report.html` in the run folder and return its path."""
    run = _open(run_dir)
    return write_bytes_atomic(run.root / "bank_report.html", bank_report_html(run).encode())
