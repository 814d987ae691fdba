"""What a serving engine does with the precision of a LoRA adapter: does an update smaller than bfloat16's
spacing reach the served policy? (issue: "learner steps that reach the served policy").

Builds the tiny random-weight model, one random adapter A (float32), and A + delta where every element moves
by a relative `--rel` (default 1e-3, below bfloat16's half-spacing of 2^-9 ~ 2e-3, so a bf16 cast drops most
of it). Each engine (`--backends`, default vllm,hf) serves both in bfloat16 (`engine.dtype`) and scores the
same completions under each; the JSON says whether the log-probs differ, by how much, and the engine's
run-to-run noise (the same adapter scored twice). Prints JSON and writes it with `--out`.

    python -m benchmarks.adapter_precision --out benchmarks/results/adapter-precision.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _perturbed_folder(src: Path, dst: Path, rel: float, seed: int) -> Path:
    """A copy of the PEFT folder `src` with every weight multiplied by (1 + rel * sign), signs random."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "adapter_config.json", dst / "adapter_config.json")
    gen = torch.Generator().manual_seed(seed)
    state = load_file(str(src / "adapter_model.safetensors"))
    out = {k: (v.float() * (1 + rel * (torch.randint(0, 2, v.shape, generator=gen) * 2 - 1))).contiguous()
           for k, v in state.items()}
    save_file(out, str(dst / "adapter_model.safetensors"), metadata={"format": "pt"})
    return dst


def measure(backend: str, model_cfg: Any, folders: dict[str, Path], dtype: str) -> dict[str, Any]:
    from coplay.artifacts import AdapterBundle
    from coplay.config import EngineConfig
    from coplay.engines.factory import make_engine

    cfg = EngineConfig(backend=backend, max_loras=4, max_lora_rank=8, max_model_len=512, max_num_seqs=8,
                       cpu_kvcache_gib=1, dtype=dtype, enforce_eager=True)
    started = time.perf_counter()
    engine = make_engine(model_cfg, cfg)
    try:
        for version, folder in enumerate(folders.values(), start=1):
            bundle = AdapterBundle.read(folder)
            engine.load_adapter("act", version, bundle.files, bundle.sha256)
        tok = engine.tokenizer
        prompts = [tok.encode(f"2048 board {i}: 2 4 8 16. Move?") for i in range(8)]
        completion = tok.encode(" ACTION: left")
        scores = {}
        for version, label in enumerate(folders, start=1):
            scores[label] = [engine.score(p, completion, f"act@v{version}") for p in prompts]
        again = [engine.score(p, completion, "act@v1") for p in prompts]
    finally:
        engine.close()

    def max_diff(a: list[list[float]], b: list[list[float]]) -> float:
        return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))

    labels = list(folders)
    return {"backend": backend, "engine_dtype": dtype, "seconds": round(time.perf_counter() - started, 1),
            "run_to_run_max_abs_logprob_diff": max_diff(scores[labels[0]], again),
            "update_max_abs_logprob_diff": max_diff(scores[labels[0]], scores[labels[1]]),
            "bf16_rounded_vs_fp32_max_abs_logprob_diff": max_diff(scores[labels[0]], scores[labels[2]])}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rel", type=float, default=1e-3)
    parser.add_argument("--backends", default="vllm,hf")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    import torch
    from safetensors.torch import load_file, save_file

    from coplay.config import LoraSpec, ModelConfig, TinyModelConfig
    from coplay.models.lora import random_adapter_folder
    from coplay.models.tiny import build_tiny_model

    root = Path(tempfile.mkdtemp(prefix="coplay-precision-"))
    model_cfg = ModelConfig(name="tiny", dtype="float32", tiny=TinyModelConfig(cache_dir=str(root / "tiny")))
    build_tiny_model(model_cfg.tiny)
    base = random_adapter_folder(model_cfg, root / "fp32", 7, LoraSpec(r=8, alpha=16, dropout=0.0))
    moved = _perturbed_folder(base, root / "fp32-moved", args.rel, 1)
    rounded = root / "bf16"
    rounded.mkdir()
    (rounded / "adapter_config.json").write_bytes((base / "adapter_config.json").read_bytes())
    state = {k: v.to(torch.bfloat16).contiguous() for k, v in
             load_file(str(base / "adapter_model.safetensors")).items()}
    save_file(state, str(rounded / "adapter_model.safetensors"), metadata={"format": "pt"})
    folders = {"fp32": base, "fp32+update": moved, "bf16-rounded": rounded}
    before = load_file(str(base / "adapter_model.safetensors"))
    after = load_file(str(moved / "adapter_model.safetensors"))
    kept = sum(int((after[k].to(torch.bfloat16) != before[k].to(torch.bfloat16)).sum()) for k in before)
    total = sum(v.numel() for v in before.values())
    results = [measure(b, model_cfg, folders, args.dtype) for b in args.backends.split(",")]
    body = {"command": "python -m benchmarks.adapter_precision " + " ".join(argv or sys.argv[1:]),
            "relative_update": args.rel, "bf16_changed_share_of_update": kept / total, "results": results}
    text = json.dumps(body, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return body


if __name__ == "__main__":
    main()
