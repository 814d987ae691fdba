"""vLLM's notices that tell a coplay user nothing they can act on, dropped knowingly from the console.

Up to its first probe, a fresh-clone `make demo` (2026-12-06) printed 14 vLLM WARNING lines and 3 bare
"Triton is installed, but ..." lines, all of them below, through Ray's worker log.
Each one below is there by a choice coplay (or its install) made on purpose, with the reason beside it;
everything else vLLM says at WARNING and above still reaches the console, and `logging.verbose` (which
leaves `COPLAY_VLLM_NOTICES` unset) shows these too.

How: a `logging.Filter` on each vLLM logger that says one of them (a module's logger), in every process
vLLM starts, through coplay's vLLM general plugin (`coplay.engines.cpu_lora.register`), and in the process
that builds the engine (`coplay.engines.factory.make_engine`).
"""

from __future__ import annotations

import logging
import os

ENV = "COPLAY_VLLM_NOTICES"  # "filter": drop the notices below (set by `quiet_third_party` unless verbose)

# message fragment -> (the logger vLLM says it through, i.e. its module; why coplay drops it)
KNOWN: dict[str, tuple[str, str]] = {
    "does not officially support disabling chunked prefill": (
        "vllm.engine.arg_utils",
        "coplay turns chunked prefill off on the CPU build on purpose: a split prefill makes vLLM rewind a "
        "seeded CPU torch.Generator, which CPU generators refuse (VllmEngine._cpu_scheduling)"),
    "Enforce eager set, disabling torch.compile": (
        "vllm.config.vllm", "repeats `engine.enforce_eager`, a setting of the run's own config"),
    "Inductor compilation was disabled by user settings": (
        "vllm.config.vllm", "the same setting again, from vLLM's compilation config"),
    "Model Runner V2 requires Triton": (
        "vllm.config.vllm", "without Triton the CPU build uses its V1 model runner, the one every test ran"),
    "Triton is not installed": (
        "vllm.platforms.cpu",
        "the CPU install leaves Triton's CPU backend out on purpose (docs/platform.md); vLLM runs without"),
    "Triton is installed, but doesn't include CPU backend": (
        "vllm.triton_utils.importing", "the same Triton, found by vLLM's import-time check"),
    "different tokenizers for different LoRAs": (
        "vllm.v1.engine.input_processor",
        "printed for any LoRA request while the engine has a tokenizer; coplay's adapter bundles carry none, "
        "so the base model's tokenizer is the one in use, as it should be"),
    "Passing raw prompts to InputProcessor is deprecated": (
        "vllm.v1.engine.input_processor",
        "coplay passes token ids (TokensPrompt), the input AsyncLLM.generate takes in vLLM 0.32; the notice "
        "announces a future API"),
    "is set; leaving Torch threads at": (
        "vllm.utils.torch_utils",
        "said where `engine.cpu_threads_bind` gives the model more than one OpenMP thread, which the run's "
        "config asked for (a SmolLM2 probe decision 4.41 -> 2.52 s on 2 cores, docs/platform.md)"),
    "is not found in LD_PRELOAD": (
        "vllm.v1.worker.cpu_worker",
        "preloading tcmalloc or Intel's OpenMP is a deployment choice (docs/platform.md), not a fault"),
}


class KnownNotices(logging.Filter):
    """Drops a record whose message contains one of `KNOWN`'s fragments; counts what it dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(fragment in message for fragment in KNOWN):
            self.dropped += 1
            return False
        return True


_installed: KnownNotices | None = None


def install() -> KnownNotices | None:
    """Attach one filter to each logger `KNOWN` names, in this process, when `ENV` says "filter";
    idempotent. A logger's own filters see every record made on it and survive vLLM's reconfiguring of
    its handlers (it configures logging again when an engine's config is built), and `getLogger` makes
    the logger before vLLM asks for it, so it works before and after `import vllm`. Returns the filter, or
    None when notices are kept."""
    global _installed
    if os.environ.get(ENV) != "filter":
        return None
    if _installed is None:
        _installed = KnownNotices()
        for name in sorted({name for name, _ in KNOWN.values()}):
            logging.getLogger(name).addFilter(_installed)
    return _installed
