"""The tiny test model: Qwen3 architecture from a config, random weights from a seed, and a byte-level BPE
tokenizer trained locally on game-like text, with a ChatML chat template.

Built once into a cache folder keyed by its config and reused; deterministic for a given seed. It runs in
vLLM's CPU build (head_dim 32 is the smallest head size its CPU attention accepts) and in transformers.
Never downloads anything.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from coplay.config import TinyModelConfig
from coplay.files import sha256_bytes

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
_BUILD_FORMAT = 2  # bump when the build recipe changes, so old cache entries are not reused


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "coplay"


def tiny_model_dir(cfg: TinyModelConfig) -> Path:
    """Where the model for `cfg` lives: `<cache>/tiny-<hash of the config>`."""
    spec = cfg.model_dump(exclude={"cache_dir"})
    spec["build_format"] = _BUILD_FORMAT
    digest = sha256_bytes(json.dumps(spec, sort_keys=True).encode())[:12]
    root = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    return root / f"tiny-{digest}"


def _train_tokenizer(cfg: TinyModelConfig):
    from coplay.models import default_device

    default_device()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from coplay.models.tiny_corpus import tiny_corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=cfg.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(tiny_corpus(cfg.seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _build(cfg: TinyModelConfig, out: Path) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    tokenizer = _train_tokenizer(cfg)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        torch_dtype="float32",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = Qwen3ForCausalLM(config)
        torch.nn.init.normal_(model.lm_head.weight, std=cfg.output_init_std)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def build_tiny_model(cfg: TinyModelConfig | None = None, force: bool = False) -> Path:
    """Build (or reuse) the tiny model folder; safe when several processes race to build it."""
    cfg = cfg or TinyModelConfig()
    out = tiny_model_dir(cfg)
    if (out / "config.json").is_file() and not force:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _build(cfg, tmp)
        if force and out.exists():
            shutil.rmtree(out)
        try:
            os.rename(tmp, out)
        except OSError:
            # lost a race to a half-built folder: impossible by rename
            if not (out / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return out
