"""The run report in real headless Chromium (Debian's `chromium`; `make system-deps` installs it).

The page records into its own DOM whether each chart drew and any script error; Chromium's `--dump-dom`
shows us that DOM after the page loaded, and `--screenshot` saves what a user sees (kept as an artifact in
the test's tmp dir and in tests/report/artifacts/, which git ignores). A deliberately broken copy of the page
proves the check notices an undrawn chart and a script error. The browser gets a proxy that goes nowhere,
so a page that needed the network would show it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).parent / "artifacts"
# Charts of the synthetic run: score 2048, score avalon, reward parts, invalid, learner, bank size, bank ops,
# skills per version, tags per version, the policy's skill use, league, timings.
EXPECTED_CHARTS = 13

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Debian's chromium is not installed "
                                       "(apt-get install -y chromium, or make system-deps)")


def chromium(page: Path, profile: Path, *mode: str) -> str:
    """Run headless Chromium on a local page with the flags this sandboxed, offline machine needs."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", "--proxy-server=http://127.0.0.1:9", "--hide-scrollbars",
           "--virtual-time-budget=10000", *mode, page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


def body_attributes(dom: str) -> dict[str, str]:
    match = re.search(r"<body([^>]*)>", dom)
    assert match is not None, f"no <body> in the dumped DOM: {dom[:500]}"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(1)))


@pytest.fixture
def report(synthetic_report) -> Path:
    return synthetic_report


def test_every_chart_draws_without_script_errors(report, tmp_path):
    attrs = body_attributes(chromium(report, tmp_path / "profile", "--dump-dom"))
    assert attrs.get("data-report-ready") == "yes", attrs
    assert attrs["data-script-errors"] == ""
    assert int(attrs["data-charts-total"]) == EXPECTED_CHARTS
    assert attrs["data-charts-ok"] == attrs["data-charts-total"], \
        f"charts not drawn: {attrs['data-charts-failed']}"
    assert attrs["data-images-ok"] == attrs["data-images-total"]  # the bank report draws inline SVG, no <img>


def test_screenshot_shows_the_report(report, tmp_path):
    from PIL import Image

    shot = tmp_path / "report.png"
    chromium(report, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2400")
    ARTIFACTS.mkdir(exist_ok=True)
    shutil.copyfile(shot, ARTIFACTS / "report.png")
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 2400)
    dark = sum(1 for v in image.getdata() if v < 128)  # text and chart lines on a white page
    assert dark > 0.005 * image.size[0] * image.size[1], \
        f"the screenshot is nearly blank ({dark} dark pixels)"


def test_the_check_notices_a_broken_chart_and_a_script_error(report, tmp_path):
    page = report.read_text()
    broken = page.replace("<section id='learning'>",
                          "<section id='learning'><figure class='chart' id='chart-empty'>"
                          "<svg xmlns='http://www.w3.org/2000/svg'></svg></figure>"
                          "<script>notAFunction();</script>", 1)
    path = tmp_path / "broken.html"
    path.write_text(broken)
    attrs = body_attributes(chromium(path, tmp_path / "profile", "--dump-dom"))
    assert int(attrs["data-charts-total"]) == EXPECTED_CHARTS + 1
    assert int(attrs["data-charts-ok"]) == EXPECTED_CHARTS
    assert attrs["data-charts-failed"] == "chart-empty"
    assert "notAFunction" in attrs["data-script-errors"]


def test_nothing_overflows_a_1400_pixel_window(report, tmp_path):
    """The widest parts (the throughput table, the charts) fit a 1400-pixel window: no sideways scrolling."""
    attrs = body_attributes(chromium(report, tmp_path / "profile", "--dump-dom", "--window-size=1400,900"))
    assert int(attrs["data-page-width"]) <= 1400, attrs["data-page-width"]
