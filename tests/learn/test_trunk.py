"""The learner's split forward (`coplay.learn.trunk`): the frozen trunk without autograd and the shared
prompt prefix give transformers' own log-probs and LoRA gradients to float32 rounding, alone, together, with
common and mixed prefixes; whole learner steps on both paths end at the same weights; the trunk's prefix
states are computed once per step; the step's common prefix is the same on every rank."""

from __future__ import annotations

import pytest
import torch
from scenarios import make_learner, prefixed_batch

from coplay.config import LoraSpec
from coplay.learn.batching import TrainItem, order_for_sharing, share_prefixes, to_micro_batch
from coplay.learn.logprobs import batch_logprobs, make_token_batch, select_adapter
from coplay.learn.trunk import (
    MIN_SHARED_PREFIX,
    PrefixStore,
    lowest_adapted_layer,
    shared_prefix_len,
)

TOP = {"top_layers": 1}  # LoRA on the upper of the tiny model's two layers: a one-layer trunk


def _policy(tiny_model_config):
    """The tiny model with a random `act` adapter on its upper layer."""
    from coplay.models.loading import load_base_model
    from coplay.models.lora import attach_adapters, randomize_adapter

    base, _ = load_base_model(tiny_model_config)
    model = attach_adapters(base, {"act": LoraSpec(r=4, alpha=8, dropout=0.0, top_layers=1)}, ("act",))
    randomize_adapter(model, "act", seed=3, scale=0.2)  # a fresh adapter (B = 0) would hide LoRA mistakes
    select_adapter(model, "act")
    return model


@pytest.fixture(scope="module")
def policy(tiny_model_config):
    return _policy(tiny_model_config)


def _tokens(gen: torch.Generator, n: int) -> list[int]:
    return torch.randint(5, 2000, (n,), generator=gen).tolist()


def _prompts(prefixes: list[list[int]], rows: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """`rows` prompts, row i opening with prefixes[i % len(prefixes)] then a tail of its own, and
    completions of unequal lengths."""
    gen = torch.Generator().manual_seed(seed)
    prompts = [prefixes[i % len(prefixes)] + _tokens(gen, 1 + (5 * i) % 9) for i in range(rows)]
    completions = [_tokens(gen, 1 + (3 * i) % 5) for i in range(rows)]
    return prompts, completions


def _logprobs_and_grads(policy, prompts, completions, depth, prefix_len):
    tokens = make_token_batch(prompts, completions)
    tokens.prefix_len = prefix_len
    tokens.prefix_store = PrefixStore()
    temps = torch.tensor([0.7 + 0.1 * i for i in range(len(prompts))])
    logprobs = batch_logprobs(policy, tokens, temps, depth)
    weights = torch.linspace(-1.0, 1.0, logprobs.numel()).reshape(logprobs.shape)
    params = {n: p for n, p in policy.named_parameters() if "lora_" in n}
    grads = torch.autograd.grad((logprobs * weights).sum(), list(params.values()))
    return logprobs.detach(), dict(zip(params, grads, strict=True))


def _assert_grads_close(grads: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Equal to float32 rounding: within 1e-5 of each tensor's largest entry (sums taken in another order
    differ by a few ulps of the large terms, which is all of a near-zero entry)."""
    for name, grad in grads.items():
        scale = float(expected[name].abs().max())
        assert scale > 0, name
        torch.testing.assert_close(grad, expected[name], rtol=1e-4, atol=1e-5 * scale, msg=name)


@pytest.mark.parametrize("mixed", [False, True], ids=["common-prefix", "mixed-prefixes"])
@pytest.mark.parametrize(("frozen", "shared"), [(True, False), (False, True), (True, True)],
                         ids=["trunk", "prefix", "trunk+prefix"])
def test_split_forward_gives_transformers_log_probs_and_lora_gradients(policy, frozen, shared, mixed):
    gen = torch.Generator().manual_seed(1)
    system, other = _tokens(gen, 40), _tokens(gen, 30)
    prompts, completions = _prompts([system, system[:12] + other] if mixed else [system], rows=5)
    expected, expected_grads = _logprobs_and_grads(policy, prompts, completions, None, 0)
    depth = lowest_adapted_layer(policy, "act") if frozen else None
    prefix = shared_prefix_len(prompts) if shared else 0
    assert depth in (None, 1) and prefix == (12 if mixed else 40) * shared
    got, grads = _logprobs_and_grads(policy, prompts, completions, depth, prefix)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    _assert_grads_close(grads, expected_grads)


def test_the_trunk_runs_without_autograd_and_the_adapted_layers_with_it(policy):
    seen: list[tuple[int, bool]] = []
    layers = policy.get_base_model().get_decoder().layers
    # on the layers' input norms: the last layer runs at the completion positions through its parts
    hooks = [layer.input_layernorm.register_forward_hook(
        lambda m, a, out, i=i: seen.append((i, torch.is_grad_enabled()))) for i, layer in enumerate(layers)]
    try:
        prompts, completions = _prompts([list(range(20, 40))], rows=3)
        _logprobs_and_grads(policy, prompts, completions, lowest_adapted_layer(policy, "act"), 20)
    finally:
        for hook in hooks:
            hook.remove()
    # the prefix's trunk, the prefix's adapted layer, then the suffix's trunk and adapted layer
    assert seen == [(0, False), (1, True), (0, False), (1, True)]
    assert lowest_adapted_layer(policy, None) == 2  # adapters disabled (the KL reference): all frozen


def test_the_trunk_of_the_steps_prefix_is_computed_once_and_a_longer_shared_part_extends_it(policy):
    system = list(range(30, 60))
    prompts, completions = _prompts([system + list(range(1, 21)), system], rows=6)
    items = order_for_sharing([TrainItem(p, c, [-1.0] * len(c), 1.0, 1.0)
                               for p, c in zip(prompts, completions, strict=True)])
    lengths = [len(i.prompt_ids) + len(i.completion_ids) for i in items]
    assert lengths == sorted(lengths)  # one common prefix: by length, so that micro-batches pad little
    chunks = [items[:3], items[3:]]
    batches = [to_micro_batch(chunk) for chunk in chunks]
    store = PrefixStore()
    share_prefixes(batches, items, world=1, store=store)
    # the step shares the 30-token system turn; the (longer) rows of the second micro-batch 20 tokens more
    assert [(b.tokens.prefix_len, b.tokens.prefix_base) for b in batches] == [(30, 30), (50, 30)]
    depth = lowest_adapted_layer(policy, "act")
    for chunk, mb in zip(chunks, batches, strict=True):
        got = batch_logprobs(policy, mb.tokens, mb.temperatures, depth)
        expected = batch_logprobs(policy, to_micro_batch(chunk).tokens, mb.temperatures)
        torch.testing.assert_close(got.detach(), expected.detach(), rtol=0, atol=1e-5)
    assert (store.misses, store.hits) == (1, 1)


def test_the_steps_common_prefix_is_used_by_every_rank_and_a_lone_rank_falls_back_to_its_own():
    gen = torch.Generator().manual_seed(2)
    a, b = _tokens(gen, 24), _tokens(gen, 24)
    assert shared_prefix_len([[1, 2, 3], [1, 2, 3]]) == 2  # one token stays to predict the completion
    assert shared_prefix_len([[1, 2, 3, 4], [1, 2, 9]]) == 2
    prompts = [a + [7], a + [8, 9], b + [7], b + [5]]
    items = order_for_sharing([TrainItem(p, [3], [-1.0], 1.0, 1.0) for p in prompts])
    assert [i.prompt_ids[0] for i in items] == sorted(i.prompt_ids[0] for i in items)
    for world, expected in ((1, [24, 24]), (2, [0, 0])):
        batches = [to_micro_batch(items[:2]), to_micro_batch(items[2:])]
        share_prefixes(batches, items, world=world)
        assert [mb.tokens.prefix_len for mb in batches] == expected
    batches = [to_micro_batch([TrainItem(a + [k], [3], [-1.0], 1.0, 1.0)]) for k in (1, 2)]
    share_prefixes(batches, [TrainItem(a + [k], [3], [-1.0], 1.0, 1.0) for k in (1, 2)], world=2)
    assert [mb.tokens.prefix_len for mb in batches] == [24, 24] and 24 >= MIN_SHARED_PREFIX


def test_checkpointed_layers_take_the_trunk_but_refuse_a_shared_prefix(tiny_model_config):
    from coplay.learn.memory import enable_checkpointing, eval_mode

    policy = _policy(tiny_model_config)
    prompts, completions = _prompts([list(range(20, 40))], rows=2)
    expected, expected_grads = _logprobs_and_grads(policy, prompts, completions, None, 0)
    enable_checkpointing(policy)
    eval_mode(policy, checkpointing=True)
    got, grads = _logprobs_and_grads(policy, prompts, completions, 1, 0)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    _assert_grads_close(grads, expected_grads)
    with pytest.raises(ValueError, match="gradient_checkpointing"):
        _logprobs_and_grads(policy, prompts, completions, 1, 20)


@pytest.mark.parametrize(("backend", "stage"), [("torch", 2), ("deepspeed", 3)])
def test_learner_steps_on_the_split_forward_end_where_the_unsplit_ones_do(tiny_model_config, backend, stage):
    """Two steps of two epochs (KL on, micro-batches of 3, on-policy old log-probs, mixed prefixes) on each
    path: the same losses and adapter weights to float32 rounding."""
    cache = tiny_model_config.tiny.cache_dir
    results = []
    for fast in (False, True):
        learner = make_learner(cache, backend, stage, names=("act",), lora=TOP, frozen_trunk=fast,
                               share_prefix=fast)
        losses = [learner.train_step(*prefixed_batch(step, ("act",))).adapters["act"]["loss"]
                  for step in (1, 2)]
        results.append((losses, learner.adapter_weights("act")))
    (old_losses, old_weights), (new_losses, new_weights) = results
    assert new_losses == pytest.approx(old_losses, rel=1e-4, abs=1e-6)
    for name, weight in new_weights.items():
        torch.testing.assert_close(weight, old_weights[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.slow
def test_two_zero3_ranks_sharing_prefixes_match_one_torch_rank_on_the_old_forward(tiny_model_config,
                                                                                   tmp_path):
    """2 ranks (gloo), ZeRO-3 with partitioned LoRA weights (gathered on every call, the prefix pass's
    included), split forward with shared prefixes, 3 steps == single-rank plain torch on transformers'
    forward."""
    import subprocess
    import sys
    from pathlib import Path

    from safetensors.torch import load_file
    from scenarios import RESUME_PLAN

    from coplay.learn.distributed import free_port, lone_process_env

    here = Path(__file__).parent
    out = tmp_path / "two-ranks.safetensors"
    cache = tiny_model_config.tiny.cache_dir
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
           f"--master_port={free_port()}", str(here / "scenarios.py"), "--cache", cache, "--backend",
           "deepspeed", "--stage", "3", "--steps", "1,2,3", "--prefixed", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=here.parent.parent,
                          env=lone_process_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    learner = make_learner(cache, "torch", lora=TOP, frozen_trunk=False, share_prefix=False)
    for step in (1, 2, 3):
        learner.train_step(*prefixed_batch(step, RESUME_PLAN[step]))
    two = load_file(str(out))
    for adapter in learner.adapter_names:
        for name, expected in learner.adapter_weights(adapter).items():
            torch.testing.assert_close(two[f"w/{adapter}/{name}"], expected, rtol=1e-4, atol=1e-5)


def test_the_answers_to_one_prompt_get_a_micro_batch_of_their_own_that_computes_the_prompt_once(policy):
    """Same-state groups: four answers at each of three states and two prompts of their own. A group's
    micro-batch shares its whole prompt (all but the token that predicts the answer); every item is trained
    exactly once over the ranks, every rank runs as many micro-batches, and the log-probs are the unsplit
    forward's."""
    from coplay.learn.batching import sharing_micro_batches

    gen = torch.Generator().manual_seed(5)
    system = _tokens(gen, 20)
    states = [system + _tokens(gen, 6 + k) for k in range(3)]
    prompts = [s for s in states for _ in range(4)] + [system + _tokens(gen, 4), system + _tokens(gen, 9)]
    items = order_for_sharing([TrainItem(p, _tokens(gen, 1 + k % 3), [-1.0] * (1 + k % 3), 1.0, 1.0, 1.0)
                               for k, p in enumerate(prompts)])
    chunks = sharing_micro_batches(items, rank=0, world=1, micro_batch_size=8)
    assert sorted(len(c) for c in chunks) == [2, 4, 4, 4]
    for chunk in chunks[:3]:
        assert all(i.prompt_ids == chunk[0].prompt_ids for i in chunk)
    batches = [to_micro_batch(chunk) for chunk in chunks]
    share_prefixes(batches, items, world=1, store=PrefixStore())
    assert [b.tokens.prefix_len for b in batches[:3]] == [len(c[0].prompt_ids) - 1 for c in chunks[:3]]
    depth = lowest_adapted_layer(policy, "act")
    for chunk, mb in zip(chunks, batches, strict=True):
        got = batch_logprobs(policy, mb.tokens, mb.temperatures, depth)
        expected = batch_logprobs(policy, to_micro_batch(chunk).tokens, mb.temperatures)
        torch.testing.assert_close(got.detach(), expected.detach(), rtol=1e-5, atol=1e-5)  # float32
    per_rank = [sharing_micro_batches(items, rank=r, world=3, micro_batch_size=8) for r in range(3)]
    assert len({len(c) for c in per_rank}) == 1
    trained = [id(i) for chunks in per_rank for c in chunks for i in c if i.weight != 0.0]
    assert sorted(trained) == sorted(id(i) for i in items)  # the padding rows weigh nothing


def test_prompts_of_their_own_beside_repeated_ones_are_cut_by_length():
    """Episode groups repeat only their first prompt (the group's episodes start on one board): the other
    samples, one prompt each, are cut into micro-batches by length, so that a micro-batch pads little."""
    from coplay.learn.batching import sharing_micro_batches

    gen = torch.Generator().manual_seed(7)
    system = _tokens(gen, 20)
    start = system + _tokens(gen, 5)
    own = [system + _tokens(gen, n) for n in (30, 3, 25, 4, 28, 2)]  # long and short, interleaved
    items = order_for_sharing([TrainItem(p, [3], [-1.0], 1.0, 1.0) for p in [start] * 4 + own])
    chunks = sharing_micro_batches(items, rank=0, world=1, micro_batch_size=3)
    singles = [c for c in chunks if c[0].prompt_ids != start]
    assert [sorted(len(i.prompt_ids) - 20 for i in c) for c in singles] == [[2, 3, 4], [25, 28, 30]]


def test_the_last_layer_runs_at_the_completion_positions_only_and_gives_the_full_layers_result(policy,
                                                                                             monkeypatch):
    """The last decoder layer's queries, output projection and MLP see only the positions that predict
    completion tokens (its keys and values every position); with the adapter on and off (the KL reference,
    whole model frozen), with and without a shared prefix, the log-probs are those of the full layer, and a
    layer `can_trim` refuses runs whole."""
    from coplay.learn import trunk
    from coplay.learn.last_layer import can_trim
    from coplay.learn.logprobs import adapter_context

    decoder = policy.get_base_model().get_decoder()
    assert can_trim(decoder.layers[-1], decoder.config)  # Qwen3-shaped (SmolLM2 is LLaMA-shaped)
    rows_seen: list[int] = []
    hook = decoder.layers[-1].mlp.register_forward_hook(lambda m, a, out: rows_seen.append(a[0].shape[1]))
    gen = torch.Generator().manual_seed(7)
    prompts, completions = _prompts([_tokens(gen, 30)], rows=4)
    width = max(len(c) for c in completions)
    try:
        for prefix in (0, 30):
            for adapter, depth in (("act", lowest_adapted_layer(policy, "act")), (None, 2)):
                with torch.no_grad(), adapter_context(policy, adapter):
                    expected = batch_logprobs(policy, make_token_batch(prompts, completions),
                                              torch.ones(4))
                    tokens = make_token_batch(prompts, completions)
                    tokens.prefix_len, tokens.prefix_store = prefix, PrefixStore()
                    rows_seen.clear()
                    got = batch_logprobs(policy, tokens, torch.ones(4), depth)
                    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
                    if adapter == "act":  # the prefix's trunk (depth 1) never reaches the last layer's MLP
                        assert rows_seen == [width]
                    monkeypatch.setattr(trunk, "can_trim", lambda layer, config: False)
                    whole = batch_logprobs(policy, tokens, torch.ones(4), depth)
                    monkeypatch.undo()
                    torch.testing.assert_close(whole, expected, rtol=0, atol=1e-5)
    finally:
        hook.remove()


def test_a_layer_of_another_shape_is_not_trimmed(policy):
    from coplay.learn.last_layer import can_trim

    decoder = policy.get_base_model().get_decoder()
    layer = decoder.layers[-1]
    layer.add_module("extra_norm", torch.nn.Identity())
    try:
        assert not can_trim(layer, decoder.config)
    finally:
        del layer.extra_norm
    assert can_trim(layer, decoder.config)


def test_a_llama_shaped_last_layer_is_trimmed_to_the_same_log_probs_and_gradients():
    """SmolLM2's shape (LLaMA: no per-head norms, grouped keys/values), built small and random here: the
    split forward's trimmed last layer gives transformers' log-probs and the last layer's gradients."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from coplay.learn.last_layer import can_trim

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=2048, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         attn_implementation="sdpa")
    model = LlamaForCausalLM(config).eval()
    assert can_trim(model.model.layers[-1], config)
    gen = torch.Generator().manual_seed(2)
    prompts, completions = _prompts([_tokens(gen, 24)], rows=3)
    last = [p for p in model.model.layers[-1].parameters()]
    results = []
    for depth, prefix in ((None, 0), (1, 24), (1, 0)):
        tokens = make_token_batch(prompts, completions)
        tokens.prefix_len, tokens.prefix_store = prefix, PrefixStore()
        logprobs = batch_logprobs(model, tokens, torch.ones(3), depth)
        results.append((logprobs.detach(), torch.autograd.grad(logprobs.sum(), last)))
    (expected, expected_grads), *split = results
    for got, grads in split:
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
        for grad, want in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(grad, want, rtol=1e-4, atol=1e-5 * float(want.abs().max()))
