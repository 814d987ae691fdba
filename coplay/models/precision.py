"""The dtype a component really runs in on a CPU, given the dtype its config asks for.

bfloat16 is only fast on CPUs that compute it natively: x86 with AVX-512 BF16 or AMX, ARM with the BF16
extension. Elsewhere (an AVX2-only x86, the common laptop and many cloud cores) PyTorch emulates it: a
2048x2048 bfloat16 matmul ran at 0.3 GFLOP/s against 122 GFLOP/s in float32 on an AVX2-only AMD EPYC
(docs/platform.md), so a bfloat16 config there turns a 15-minute demo into hours. `model.cpu_bf16: auto`
(the default) therefore runs bfloat16 as float32 on such a CPU, with one warning per process that says so;
`keep` runs what the config says. GPUs are never affected. float32 costs twice the memory of bfloat16 and
gives the same or better numerics, so the fallback changes speed and memory only.
"""

from __future__ import annotations

import functools
import logging
import platform
from pathlib import Path

log = logging.getLogger(__name__)

# /proc/cpuinfo flags that mean the CPU computes bfloat16 natively
X86_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
ARM_BF16_FLAGS = frozenset({"bf16"})


def cpu_flags(cpuinfo: str) -> set[str]:
    """Every flag named on a `flags` (x86) or `Features` (ARM) line of a /proc/cpuinfo text."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return flags


def has_native_bf16(cpuinfo: str, machine: str) -> bool:
    """Whether a CPU with this /proc/cpuinfo text and `platform.machine()` computes bfloat16 natively."""
    flags = cpu_flags(cpuinfo)
    wanted = ARM_BF16_FLAGS if machine.lower() in ("aarch64", "arm64") else X86_BF16_FLAGS
    return bool(flags & wanted)


@functools.lru_cache(maxsize=1)
def native_cpu_bf16() -> bool:
    """This machine's answer; True where /proc/cpuinfo cannot be read (macOS, Windows): there coplay does not
    second-guess the config."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    return has_native_bf16(text, platform.machine())


@functools.cache
def _warn_once(what: str) -> None:
    log.warning("%s asks for bfloat16, but this CPU has no native bfloat16 (no AVX-512 BF16, AMX or ARM "
                "BF16): running float32 instead, which is far faster here. Set model.cpu_bf16=keep to run "
                "bfloat16 anyway.", what)


def cpu_dtype(name: str, policy: str = "auto", what: str = "the config") -> str:
    """The dtype a CPU component runs for config dtype `name`: bfloat16 becomes float32 when `policy` is
    `auto` and the CPU has no native bfloat16; everything else is returned as given."""
    if policy not in ("auto", "keep"):
        raise ValueError(f"model.cpu_bf16={policy!r}: expected 'auto' or 'keep'")
    if name == "bfloat16" and policy == "auto" and not native_cpu_bf16():
        _warn_once(what)
        return "float32"
    return name
