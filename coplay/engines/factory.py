"""Build the configured engine: `engine.backend` picks `vllm` (default; GPU or CPU build) or `hf`.

Imports a backend only when it is chosen, so `hf` works on machines without vllm.
"""

from __future__ import annotations

from pathlib import Path

from coplay.config import EngineConfig, ModelConfig
from coplay.engines.base import Engine


def make_engine(model: ModelConfig, engine: EngineConfig, *, seed: int = 0, device: str | None = None,
                work_dir: str | Path | None = None) -> Engine:
    """The engine for `engine.backend` serving `model`. `device` is for `hf` (default: cuda if present);
    `work_dir` is where `vllm` keeps adapter folders (default: a temp folder removed on close).

    Build a `vllm` engine under `if __name__ == "__main__":` or in a fixture: vLLM spawns processes.
    """
    if engine.backend == "vllm":
        from coplay.engines import vllm_notices

        vllm_notices.install()  # here; coplay's vLLM plugin installs it in the processes vLLM starts
        from coplay.engines.vllm_engine import VllmEngine

        return VllmEngine(model, engine, seed=seed, work_dir=work_dir)
    if engine.backend == "hf":
        from coplay.engines.hf_engine import HfEngine

        return HfEngine(model, engine, device=device)
    raise ValueError(f"engine.backend={engine.backend!r}: expected 'vllm' or 'hf'")
