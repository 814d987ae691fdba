"""What a new user's console shows: run a command (default `make demo` in a fresh clone of this checkout),
keep every line with the second it arrived, and count the lines by source (coplay's own, vLLM, Ray,
DeepSpeed, torch's C++ warnings, Python warnings, make/pip) and the longest stretch without any output.

    python -m benchmarks.console_transcript --fresh-clone --out benchmarks/results/demo-transcript

writes `<out>.txt` (each line prefixed with its arrival time in seconds) and `<out>.json` (the command, the
commit, wall time, exit code, counts by source, the longest silence with the lines around it, the final
summary: the lines from `run folder:` on, and `rulers`: the run's evaluations and probes as figures, each
beside the random and expert bots on the same protocol), and prints the JSON. Sources are told apart by the
format each library logs in (vLLM's `INFO 12-06 09:00:00 [file.py:12]`, Ray's `... INFO worker.py:12 -- ...`,
the `(Actor pid=N)` prefix of a line an actor printed, which is stripped first); a line none of them claims is
counted as coplay's, so "coplay" is an upper bound on coplay's own share. `PYTHONUNBUFFERED=1` is set, so a
silence is the program's, not a pipe buffer's. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Ray's `(Actor pid=N)` (and `ip=...`), and vLLM's `(MainProcess pid=N)` inside it; either may repeat
ACTOR_PREFIX = re.compile(r"^(?:\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\d.]+)?\)\s?)+")
VLLM_LOG = re.compile(r"^(?:\x1b\[[0-9;]*m)?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)(?:\x1b\[[0-9;]*m)? "
                      r"\d\d-\d\d \d\d:\d\d:\d\d")
RAY_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(?:INFO|WARNING|ERROR|DEBUG)\s+\S+\.py:\d+ -- ")
# DeepSpeed's own log format and names (not the word, which coplay's `learner (1 ranks, deepspeed)` says)
DEEPSPEED = re.compile(r"\[DeepSpeed\]|real_accelerator|ds_accelerator|\[(?:INFO|WARNING)\] \[", re.I)
# torch's C++ warnings (`TORCH_WARN`): `[W1206 12:28:49.518102627 utils.cpp:68] Warning: ...`
TORCH_CPP = re.compile(r"^\[[WIE]\d{4} \d\d:\d\d:\d\d\.\d+ [\w.]+:\d+\]")
WARNING = re.compile(r"\b\w*Warning: |^\s+warnings\.warn\(|^\s+warn\(")
MAKE_PIP = re.compile(r"^(?:\.venv/bin/|make(?:\[\d+\])?: |(?:WARNING|ERROR|DEPRECATION|NOTICE): |"
                      r"Collecting |Requirement already|Installing |"
                      r"Successfully |Downloading |Building |Created wheel|python3?(?:\.\d+)? -m |"
                      r"uv |Using |Resolved |Prepared |Installed |Audited | [+-] )")
SUMMARY_START = "run folder:"


def source_of(line: str) -> tuple[str, bool]:
    """(source, printed by a Ray actor) for one console line."""
    plain = ANSI.sub("", line)
    stripped = ACTOR_PREFIX.sub("", plain)
    via_actor = stripped != plain
    for name, pattern in (("vllm", VLLM_LOG), ("ray", RAY_LOG), ("make/pip", MAKE_PIP), ("torch", TORCH_CPP),
                          ("deepspeed", DEEPSPEED), ("python warning", WARNING)):
        if pattern.search(stripped):
            return name, via_actor
    if "vllm" in stripped.lower():
        return "vllm", via_actor
    return "coplay", via_actor


def run_and_record(command: list[str], cwd: Path) -> tuple[list[tuple[float, str]], list[float], int, float]:
    """Run `command`; every line with its arrival second, every chunk's arrival second (a `\\r` progress
    redraw is output too), the exit code and the wall seconds."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    lines: list[tuple[float, str]] = []
    arrivals: list[float] = []
    pending = b""
    while True:
        if not selector.select(timeout=1.0):
            if proc.poll() is not None:
                break
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        now = time.monotonic() - started
        arrivals.append(now)
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        pending += chunk
        *done, pending = re.split(rb"\r\n|\n|\r", pending)
        lines += [(now, part.decode("utf-8", "replace")) for part in done if part.strip()]
    if pending.strip():
        lines.append((time.monotonic() - started, pending.decode("utf-8", "replace")))
    code = proc.wait()
    return lines, arrivals, code, time.monotonic() - started


def longest_silence(lines: list[tuple[float, str]], arrivals: list[float], wall: float,
                    start: float = 0.0) -> dict[str, Any]:
    """The longest stretch without output, from `start` (the run's) to its end, with the lines on either
    side of it."""
    marks = [start, *arrivals, wall]
    gaps = [(marks[i + 1] - marks[i], marks[i]) for i in range(len(marks) - 1)]
    length, start = max(gaps)
    before = [text for t, text in lines if t <= start][-1:] or ["(start)"]
    after = [text for t, text in lines if t > start][:1] or ["(end)"]
    return {"seconds": round(length, 1), "from_s": round(start, 1), "line_before": before[0],
            "line_after": after[0]}


def summarize(lines: list[tuple[float, str]], arrivals: list[float], code: int, wall: float,
              command: list[str], commit: str) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    via_actor = 0
    for _, text in lines:
        source, actor = source_of(text)
        counts[source] += 1
        via_actor += actor
    texts = [text for _, text in lines]
    starts = [i for i, text in enumerate(texts) if text.startswith(SUMMARY_START)]
    total = len(lines)
    # `make demo` on a fresh clone installs first: the share among the lines after make starts the demo
    begun = next((i for i, text in enumerate(texts) if re.search(r"bin/coplay demo\b", text)), None)
    after = Counter(source_of(text)[0] for text in texts[begun + 1:]) if begun is not None else None
    begun_s = lines[begun][0] if begun is not None else 0.0
    return {"command": " ".join(command), "commit": commit, "exit_code": code, "wall_s": round(wall, 1),
            "lines": total, "by_source": dict(counts.most_common()),
            "coplay_share": round(counts["coplay"] / total, 3) if total else None,
            "after_install": ({"started_s": round(begun_s, 1), "lines": sum(after.values()),
                               "by_source": dict(after.most_common()),
                               "coplay_share": round(after["coplay"] / max(1, sum(after.values())), 3),
                               "longest_silence": longest_silence(
                                   lines[begun:], [t for t in arrivals if t >= begun_s], wall, begun_s)}
                              if after is not None else None),
            "printed_by_ray_actors": via_actor,
            "longest_silence": longest_silence(lines, arrivals, wall),
            "final_summary": texts[starts[-1]:] if starts else texts[-20:]}


def rulers(run_root: Path) -> dict[str, Any] | None:
    """The run's evaluations and probes as figures (`eval/it<k>.json`, `eval/probe-it<k>.json`), each score
    beside the random and expert bots on the same seeds or positions (an evaluation file's protocol check,
    a probe file's bots) so the transcript never carries a score alone; None when the run has neither."""
    folder = run_root / "eval"
    evaluations, probes = [], []
    for path in sorted(folder.glob("it*.json")) if folder.is_dir() else []:
        body = json.loads(path.read_text())
        checks = (body["meta"].get("protocol_check") or {}).get("games", {})
        games = {}
        for game, entry in body["results"].items():
            check = checks.get(game, {})
            games[game] = {"score": entry.get("score"),
                           **({"calls": entry["calls"]} if "calls" in entry else {}),
                           "bots": {b: check[b] for b in ("random", "expert", "heuristic") if b in check},
                           "protocol_check_passed": check.get("passed"),
                           "vs_bots": (body["meta"].get("vs_bots") or {}).get(game)}
        evaluations.append({"file": path.name, "iteration": body["meta"].get("iteration"), "games": games})
    for path in sorted(folder.glob("probe-it*.json")) if folder.is_dir() else []:
        body = json.loads(path.read_text())
        games = {game: {who: {"mean_regret": entry[who]["mean_regret"], "regret": entry[who].get("regret"),
                              "n": entry[who].get("n")} for who in ("model", "random", "expert")}
                 | {"bots_separate": entry.get("bots_separate")} for game, entry in body["results"].items()}
        probes.append({"file": path.name, "iteration": body["meta"].get("iteration"), "games": games})
    return {"evaluations": evaluations, "probes": probes} if evaluations or probes else None


def run_folder(final_summary: list[str], cwd: Path) -> Path | None:
    """The run folder the demo printed (`run folder:   runs/...`), under the command's working directory."""
    for text in final_summary:
        if text.startswith(SUMMARY_START):
            return cwd / text[len(SUMMARY_START):].strip()
    return None


def add_rulers(summary: Path, ran_in: Path) -> int:
    """Add the run folder's `rulers` to a summary JSON written before (its measured fields stay as they
    were); 1 when the folder it names is gone or holds no evaluation or probe."""
    result = json.loads(summary.read_text())
    folder = run_folder(result["final_summary"], ran_in)
    found = rulers(folder) if folder is not None else None
    if found is None:
        print(f"{summary}: no evaluation or probe in {folder}", file=sys.stderr)
        return 1
    result["rulers"] = found
    summary.write_text(json.dumps(result, indent=1) + "\n")
    return 0


def recount(txt: Path) -> int:
    """Summarize a saved `<out>.txt` again with today's classifier, updating `<out>.json` (its command,
    commit, exit code and wall time are kept)."""
    lines = []
    for row in txt.read_text().splitlines():
        match = re.match(r"^\[\s*([\d.]+)s\] (.*)$", row)
        if match:
            lines.append((float(match.group(1)), match.group(2)))
    old = json.loads(txt.with_suffix(".json").read_text())
    result = {**old, **summarize(lines, [t for t, _ in lines], old["exit_code"], old["wall_s"],
                                 old["command"].split(), old["commit"])}
    txt.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh-clone", action="store_true",
                        help="git clone this checkout's HEAD into a temporary folder and run there")
    parser.add_argument("--clone-into", metavar="DIR",
                        help="with --fresh-clone: clone into DIR (which must not exist) and keep it after, "
                             "e.g. to time further commands in the clone and on the run folder it made")
    parser.add_argument("--out", default="benchmarks/results/demo-transcript",
                        help="path stem of the .txt transcript and the .json summary")
    parser.add_argument("--recount", metavar="TXT",
                        help="summarize a transcript written before (its line times stand for the arrivals)")
    parser.add_argument("--add-rulers", nargs=2, metavar=("JSON", "DIR"),
                        help="add `rulers` to a summary written before, from the run folder its command made "
                             "in DIR (e.g. the --clone-into DIR); nothing else in it changes")
    parser.add_argument("command", nargs="*", default=["make", "demo"])
    args = parser.parse_args(argv)
    if args.recount:
        return recount(Path(args.recount))
    if args.add_rulers:
        return add_rulers(Path(args.add_rulers[0]), Path(args.add_rulers[1]))
    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="coplay-fresh-") as tmp:
        cwd = root
        if args.fresh_clone:
            cwd = Path(args.clone_into) if args.clone_into else Path(tmp) / "coplay"
            subprocess.run(["git", "clone", "--quiet", str(root), str(cwd)], check=True)
        lines, arrivals, code, wall = run_and_record(args.command, cwd)
        result = summarize(lines, arrivals, code, wall, args.command, commit)
        folder = run_folder(result["final_summary"], cwd)
        if folder is not None and (found := rulers(folder)):
            result["rulers"] = found  # read before a temporary clone goes
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text("".join(f"[{t:7.1f}s] {text}\n" for t, text in lines))
    result["fresh_clone"] = args.fresh_clone
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
