"""The benchmark suite runner behind `coplay bench [--quick]` and `python -m benchmarks.run_all [--quick]`.

Each suite member is a module `benchmarks/<name>.py` of the repository (envs, engines, skillbank, learner,
e2e). It runs as its own process, `python -m benchmarks.<name> [--quick]`, in the repository root, so one
member's crash, memory or threads cannot disturb the next; it prints one JSON object (the last thing on its
stdout). A member that is not there is listed as missing; one that fails, times out or prints no JSON is
recorded with its error and the suite goes on. The results go to `benchmarks/results/<host>-<date>.json`
(`-quick` added for quick runs), and a summary table is printed. A member may put a `"headline"` object of
named numbers in its JSON to choose what the summary shows; otherwise its first top-level numbers are shown.
Standard library + rich only; never imports ray, torch or the engines (the members do).
"""

from __future__ import annotations

import io
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coplay.driver.progress import HEARTBEAT_S

SUITE = ("envs", "engines", "runner", "skillbank", "learner", "e2e")
QUICK_TIMEOUT_S = 900
FULL_TIMEOUT_S = 7200
SUMMARY_FIGURES = 4


@dataclass
class MemberResult:
    """What one suite member did: `ok`, `missing`, `failed` or `timeout`, with its JSON or its error."""

    name: str
    status: str
    command: str
    seconds: float = 0.0
    result: dict[str, Any] | None = None
    error: str = ""
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "command": self.command,
                               "seconds": round(self.seconds, 1)}
        if self.result is not None:
            out["result"] = self.result
        if self.error:
            out["error"] = self.error
        if self.note:
            out["note"] = self.note
        return out


def repo_root() -> Path:
    """The checkout holding `benchmarks/` (the suite runs from the source tree, not from an installed
    wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "benchmarks" / "__init__.py").is_file():
        raise FileNotFoundError(f"{root / 'benchmarks'}: no benchmarks package here; the suite runs from a "
                                "coplay checkout (git clone, then `pip install -e .`)")
    return root


def last_json_object(stdout: str) -> dict[str, Any] | None:
    """The last JSON object printed on stdout (members may log lines before it)."""
    decoder = json.JSONDecoder()
    text = stdout.rstrip()
    starts = [i for i in range(len(text)) if text[i] == "{" and (i == 0 or text[i - 1] == "\n")]
    for start in reversed(starts):
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and not text[end:].strip():
            return obj
    return None


def run_member(name: str, quick: bool, root: Path, timeout_s: float) -> MemberResult:
    """Run `benchmarks/<name>.py` as a process and collect its JSON. A member whose argument parser rejects
    `--quick` is run once more with its own defaults, and its record says so (`note`)."""
    if not (root / "benchmarks" / f"{name}.py").is_file():
        return MemberResult(name, "missing", f"python -m benchmarks.{name}",
                            error=f"benchmarks/{name}.py does not exist in {root}")
    member = _run_process(name, quick, root, timeout_s)
    if quick and member.status == "failed" and "unrecognized arguments: --quick" in member.error:
        member = _run_process(name, False, root, timeout_s)
        member.note = "the member has no --quick flag: it ran with its defaults"
    return member


def _run_process(name: str, quick: bool, root: Path, timeout_s: float) -> MemberResult:
    args = [sys.executable, "-m", f"benchmarks.{name}"] + (["--quick"] if quick else [])
    command = " ".join(["python", *args[1:]])
    start = time.perf_counter()
    # Its own session, so a timeout stops the member's children too (engine cores, Ray workers).
    proc = subprocess.Popen(args, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    while True:
        # a member prints only its JSON, at the end: a `still running` line every HEARTBEAT_S meanwhile
        # (retrying communicate after its timeout loses no output)
        elapsed = time.perf_counter() - start
        try:
            stdout, stderr = proc.communicate(timeout=max(0.1, min(HEARTBEAT_S, timeout_s - elapsed)))
            break
        except subprocess.TimeoutExpired:
            elapsed = time.perf_counter() - start
            if elapsed < timeout_s:
                print(f"[bench] {name}: still running ({elapsed:.0f} s)", flush=True)
                continue
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
            return MemberResult(name, "timeout", command, elapsed,
                                error=f"no result after {timeout_s:.0f} s (stopped)\n"
                                      f"stderr tail:\n{stderr[-2000:]}")
    done = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    seconds = time.perf_counter() - start
    result = last_json_object(done.stdout)
    if done.returncode != 0:
        last = next((ln for ln in reversed(done.stderr.splitlines()) if ln.strip()), "(no stderr)")
        return MemberResult(name, "failed", command, seconds, result,
                            f"exit status {done.returncode}: {last}\nstderr tail:\n{done.stderr[-2000:]}")
    if result is None:
        return MemberResult(name, "failed", command, seconds,
                            error=f"printed no JSON object; stdout tail: {done.stdout[-1000:]}")
    return MemberResult(name, "ok", command, seconds, result)


def headline(result: dict[str, Any] | None) -> list[tuple[str, float]]:
    """The figures the summary table shows for one member."""
    if not result:
        return []
    chosen = result.get("headline")
    source = chosen if isinstance(chosen, dict) else result
    figures = [(k, v) for k, v in source.items() if isinstance(v, int | float) and not isinstance(v, bool)]
    return figures if isinstance(chosen, dict) else figures[:SUMMARY_FIGURES]


def summary_table(members: list[MemberResult]) -> str:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="coplay benchmark suite")
    for col in ("benchmark", "status", "seconds", "headline figures"):
        table.add_column(col, overflow="fold")
    for m in members:
        figures = ", ".join(f"{k}={v:g}" for k, v in headline(m.result))
        detail = figures if m.status == "ok" else (m.error.splitlines()[0][:160] if m.error else "")
        detail += f" ({m.note})" if m.note else ""
        table.add_row(m.name, m.status, f"{m.seconds:.1f}", detail)
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def results_path(root: Path, quick: bool, when: float | None = None) -> Path:
    host = socket.gethostname().split(".")[0] or "host"
    date = time.strftime("%Y-%m-%d", time.localtime(when))
    return root / "benchmarks" / "results" / f"{host}-{date}{'-quick' if quick else ''}.json"


def run_suite(quick: bool, names: tuple[str, ...] = SUITE, out: Path | None = None,
              timeout_s: float | None = None, root: Path | None = None) -> tuple[Path, list[MemberResult]]:
    """Run every member in turn (from `root`, default this checkout), print one line per member as it
    finishes, write the results file."""
    from coplay.files import write_json_atomic

    root = root or repo_root()
    limit = timeout_s if timeout_s is not None else (QUICK_TIMEOUT_S if quick else FULL_TIMEOUT_S)
    started = time.time()
    members = []
    for name in names:
        print(f"[bench] {name}: running python -m benchmarks.{name}{' --quick' if quick else ''}", flush=True)
        member = run_member(name, quick, root, limit)
        note = member.error.splitlines()[0][:200] if member.error else member.note
        print(f"[bench] {name}: {member.status} in {member.seconds:.1f} s {note}".rstrip(), flush=True)
        members.append(member)
    path = out or results_path(root, quick, started)
    write_json_atomic(path, {
        "command": f"python -m benchmarks.run_all{' --quick' if quick else ''}", "quick": quick,
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 1), "python": sys.version.split()[0],
        "platform": platform.platform(), "cpus": _cpu_count(),
        "benchmarks": {m.name: m.as_dict() for m in members},
    })
    return path, members


def _cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def bench_command(quick: bool, only: str | None, out: str | None, timeout_s: float | None) -> int:
    """Run the suite (`only`: comma-separated members); exit status 0 when no present member failed (missing
    members are not failures)."""
    names = tuple(n.strip() for n in only.split(",")) if only else SUITE
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        print(f"coplay bench: --only {unknown}: expected some of {', '.join(SUITE)}", file=sys.stderr)
        return 2
    path, members = run_suite(quick, names, Path(out) if out else None, timeout_s)
    print(summary_table(members), end="")
    print(f"results written to {path}")
    return 1 if any(m.status in ("failed", "timeout") for m in members) else 0
