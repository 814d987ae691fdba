"""`coplay report RUN_DIR`: one self-contained `report.html` in the run folder.

Everything is inline: the charts are SVG drawn by matplotlib, the bank section's plots are base64 PNG, the
style sheet and one small script are in the page. Nothing is fetched from the network. The script records
into the DOM whether every chart drew (`<body data-charts-ok="N" data-charts-total="N">`, each
`<figure class="chart" data-drawn="yes|no">`, every `<img>` decoded: `data-images-ok`) and any script error
(`data-script-errors`), so a headless browser can check the page (tests/report/test_report_chromium.py).
Never imports ray or torch.
"""

from __future__ import annotations

import html
import time
from pathlib import Path

from coplay.files import write_bytes_atomic
from coplay.report import sections, skill_views, timeline
from coplay.report.data import RunData, load_run
from coplay.runs import RunDir

STYLE = """
body{font-family:system-ui,sans-serif;max-width:1180px;margin:0 auto;padding:0 16px 40px;color:#222}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px}nav a{margin-right:12px}
figure.chart{margin:12px 0}figure.chart svg{max-width:100%;height:auto}
figcaption{font-size:12px;color:#555;max-width:900px}
table{border-collapse:collapse;font-size:12px;margin:6px 0}\
td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}tr.median td{font-weight:bold}
.none,.note,.meta{color:#666;font-size:13px}.problem{color:#b00}
pre.config{font-size:11px;background:#f7f7f7;padding:8px;max-height:320px;overflow:auto}
.bank-report img{max-width:100%}td.what,th.what{text-align:left;max-width:520px}
div.wide{max-width:100%;overflow-x:auto}table.throughput th{max-width:90px;vertical-align:bottom}
"""

# First thing in <head>: record any script error (also one thrown by the check below) into the DOM.
ERROR_HOOK = """
window.__reportErrors = [];
window.addEventListener('error', function (ev) {
  window.__reportErrors.push(String(ev.message || ev.type) + \
(ev.filename ? ' @' + ev.filename + ':' + ev.lineno : ''));
  if (document.body) { document.body.setAttribute('data-script-errors', window.__reportErrors.join(' | ')); }
});
"""

# Last thing in <body>, and again on `load` (images decode asynchronously): a chart drew when its SVG has a
# laid-out, non-empty bounding box and drawn marks; an image drew when it decoded to a non-zero size.
CHECK_SCRIPT = """
(function () {
  function check() {
    var figures = document.querySelectorAll('figure.chart');
    var ok = 0, failed = [];
    for (var i = 0; i < figures.length; i++) {
      var svg = figures[i].querySelector('svg');
      var drawn = false;
      if (svg) {
        var box = svg.getBBox();
        var marks = svg.querySelectorAll('path, rect, use, polyline, polygon, line').length;
        drawn = box.width > 0 && box.height > 0 && marks > 0 && svg.getBoundingClientRect().width > 0;
      }
      figures[i].setAttribute('data-drawn', drawn ? 'yes' : 'no');
      if (drawn) { ok++; } else { failed.push(figures[i].id); }
    }
    var images = document.querySelectorAll('img');
    var imagesOk = 0;
    for (var j = 0; j < images.length; j++) {
      if (images[j].complete && images[j].naturalWidth > 0) { imagesOk++; }
    }
    var body = document.body;
    body.setAttribute('data-charts-total', String(figures.length));
    body.setAttribute('data-charts-ok', String(ok));
    body.setAttribute('data-charts-failed', failed.join(','));
    body.setAttribute('data-images-total', String(images.length));
    body.setAttribute('data-images-ok', String(imagesOk));
    body.setAttribute('data-script-errors', window.__reportErrors.join(' | '));
    body.setAttribute('data-page-width', String(document.documentElement.scrollWidth));
  }
  check();
  window.addEventListener('load', function () { check(); \
document.body.setAttribute('data-report-ready', 'yes'); });
})();
"""

SECTIONS = (
    ("cold-start", "Cold start", sections.cold_start),
    ("learning", "Learning curves", sections.learning_curves),
    ("rewards", "Reward parts per adapter", sections.reward_parts),
    ("invalid", "Invalid actions", sections.rates),
    ("learner", "Learner", sections.learner),
    ("banks", "Skill banks", sections.banks),
    ("skills", "Skill analysis", skill_views.run_report_section),
    ("league", "Self-play league", sections.league),
    ("eval", "Evaluations", sections.evaluations),
    ("probe", "Per-decision probe", sections.probes),
    ("throughput", "Throughput", sections.throughput),
    ("phases", "Phase timeline", timeline.section),
)


def render_report(data: RunData) -> str:
    """The whole page as a string."""
    e = html.escape
    name = data.root.name
    nav = "".join(f"<a href='#{key}'>{e(title)}</a>" for key, title, _ in SECTIONS)
    body = "".join(f"<section id='{key}'><h2>{e(title)}</h2>{build(data)}</section>"
                   for key, title, build in SECTIONS)
    iterations = len(data.iterations)
    summary = (f"<p>{iterations} iteration record(s), {len(data.evals)} evaluation(s), "
               f"{len(data.banks)} bank(s). "
               f"Written {time.strftime('%Y-%m-%d %H:%M:%S %Z')} by "
               f"<code>coplay report {e(str(data.root))}</code>.</p>")
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>coplay run {e(name)}</title><script>{ERROR_HOOK}</script><style>{STYLE}</style></head>"
        f"<body><h1>coplay run <code>{e(name)}</code></h1>{summary}<nav>{nav}</nav>{body}"
        f"{sections.problems(data)}"
        f"<section id='config'><h2>Config</h2><pre class='config'>{e(data.config_text)}</pre></section>"
        f"<script>{CHECK_SCRIPT}</script></body></html>"
    )


def write_report(run_dir: str | Path | RunDir) -> Path:
    """Write `report.html` in the run folder (atomically) and return its path."""
    run = run_dir if isinstance(run_dir, RunDir) else RunDir.open(run_dir)
    return write_bytes_atomic(run.report, render_report(load_run(run)).encode())
