"""Resolve `coplay[gpu]` for a GPU cluster node (Linux x86-64, CPython 3.11, CUDA wheels from PyPI) with pip's
own resolver, without installing anything, and write or check `requirements/lock-gpu.txt`.

    python requirements/lock_gpu.py            # write requirements/lock-gpu.txt
    python requirements/lock_gpu.py --check    # resolve again; exit 1 naming every pin that differs

pip is asked for a dry-run report (`pip install --dry-run --report --ignore-installed --only-binary=:all:`)
for the target platform, whatever machine runs it:
- `--platform` lists every manylinux tag up to glibc `GLIBC` (pip does not widen an explicit tag to older
  ones: `manylinux_2_28_x86_64` alone refuses a `manylinux_2_17` wheel);
- pip runs with no configuration file and only PyPI (`PIP_CONFIG_FILE=/dev/null`, no `PIP_*` variables but
  the certificate bundle): a machine's local wheels or constraints must not leak into the lock (here
  `/opt/wheels` offers `torch 2.13.0+cpu`, which satisfies `torch==2.13.0` and would lock a CPU torch);
- the two pins PyPI has only as source distributions (`SDIST_ONLY`: DeepSpeed, diplomacy; both build to
  pure-Python wheels) are built here first with `pip wheel --no-deps` and offered with `--find-links`,
  since `--only-binary=:all:` (which `--platform` requires) refuses sdists.
Imports only the standard library.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock-gpu.txt"
PYTHON_VERSION = "3.11"
# Ubuntu 22.04 (glibc 2.35); the set needs >= 2.31 (llguidance 1.7 has x86-64 wheels for manylinux_2_31 only)
GLIBC = 35
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
INDEX = "https://pypi.org/simple"
SDIST_ONLY = ("deepspeed", "diplomacy")
HEADER = """\
# coplay[gpu] resolved by pip for Linux x86-64 (manylinux up to glibc 2.{glibc}), CPython {python}, from PyPI.
# Made by `python requirements/lock_gpu.py`; checked by tests/test_lock_gpu.py. Install on a node with
#   pip install -c requirements/lock-gpu.txt '.[gpu]'
# vllm {vllm}, torch {torch} (CUDA {cuda} runtime wheels: NVIDIA driver >= {driver}),
# NCCL {nccl}.
"""
# the oldest Linux driver each CUDA major's runtime wheels run on (CUDA release notes: 12.x 525, 13.x 580)
MIN_DRIVER = {"12": "525", "13": "580"}


def clean_env() -> dict[str, str]:
    """This environment without pip's configuration: no config files, no PIP_* variable but the certificate
    bundle a proxy may need."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def pip(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          env=clean_env(), timeout=timeout, cwd=REPO)


def sdist_pins() -> list[str]:
    """The pyproject requirements of the packages PyPI has only as source distributions."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in deps if re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower() in SDIST_ONLY]
    if len(pins) != len(SDIST_ONLY):
        raise SystemExit(f"pyproject.toml: expected one dependency each for {SDIST_ONLY}, found {pins}")
    return pins


def resolve(workdir: Path) -> dict:
    """pip's dry-run report for `.[gpu]` on the target platform (raises with pip's last lines if it fails)."""
    wheels = workdir / "wheels"
    built = pip("wheel", "--no-deps", "--index-url", INDEX, "-w", str(wheels), *sdist_pins())
    if built.returncode != 0:
        raise RuntimeError(f"building {SDIST_ONLY} wheels failed:\n{built.stderr[-3000:]}")
    report = workdir / "report.json"
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    done = pip("install", "--dry-run", "--quiet", "--ignore-installed", "--report", str(report),
               "--index-url", INDEX, "--find-links", str(wheels), "--only-binary=:all:", *platforms,
               "--python-version", PYTHON_VERSION, "--implementation", "cp", f"{REPO}[gpu]")
    if done.returncode != 0:
        raise RuntimeError(f"pip could not resolve coplay[gpu] for {PLATFORMS[0]}:\n{done.stderr[-3000:]}")
    return json.loads(report.read_text())


def pins(report: dict) -> dict[str, str]:
    """name -> version of every distribution in the report but coplay itself (names as PyPI spells them)."""
    out = {}
    for item in report["install"]:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if name.lower() != "coplay":
            out[name] = version
    return out


def summary(report: dict) -> dict[str, str]:
    """vllm, torch, the CUDA runtime and NCCL versions of the resolved set, and the driver that needs."""
    found = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report["install"]}
    runtime = next((v for k, v in found.items() if k.startswith("nvidia-cuda-runtime")), "none")
    nccl = next((v for k, v in found.items() if k.startswith("nvidia-nccl")), "none")
    major = runtime.split(".")[0]
    return {"vllm": found.get("vllm", "none"), "torch": found.get("torch", "none"), "cuda": runtime,
            "nccl": nccl, "driver": MIN_DRIVER.get(major, "?"), "glibc": str(GLIBC), "python": PYTHON_VERSION}


def lock_text(report: dict) -> str:
    ordered = sorted(pins(report).items(), key=lambda item: item[0].lower())
    body = "".join(f"{name}=={version}\n" for name, version in ordered)
    return HEADER.format(**summary(report)) + body


def read_lock(path: Path = LOCK) -> dict[str, str]:
    """The pins of a lock file: name -> version."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            out[name] = version
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with requirements/lock-gpu.txt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = resolve(Path(tmp))
    if not args.check:
        LOCK.write_text(lock_text(report))
        print(json.dumps({"lock": str(LOCK.relative_to(REPO)), "pins": len(pins(report)), **summary(report)}))
        return
    new, old = pins(report), read_lock()
    differ = sorted(f"{n}: lock {old.get(n)}, pip {new.get(n)}" for n in set(new) | set(old)
                    if new.get(n) != old.get(n))
    print(json.dumps({"same": not differ, "differ": differ, **summary(report)}))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
