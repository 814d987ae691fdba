"""Base model + tokenizer loading, LoRA specs for the five adapters, and the tiny test model.

Imports torch/transformers/peft lazily (inside functions) so `import coplay.models` is cheap.
"""

from __future__ import annotations

import os


def default_device() -> str:
    """`cuda` when a GPU is visible, else `cpu`. Also tells DeepSpeed (which transformers imports) which
    accelerator to use on CPU machines, so it does not probe and print a warning to stdout."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    return "cpu"
