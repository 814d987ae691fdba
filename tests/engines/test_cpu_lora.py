"""coplay's grouped CPU LoRA ops (`coplay.engines.cpu_lora`) against vLLM's own `sgmv_*` ops, which they
replace in the engine core: the same sums for every request that has a LoRA, nothing for one that has none,
and the switch back to vLLM's ops."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
ops = pytest.importorskip("vllm.lora.ops.torch_ops")

from coplay.engines import cpu_lora  # noqa: E402

# three requests of 4, 3 and 5 tokens on LoRA slots 1, none (-1) and 0
STARTS, LENS, SLOTS = torch.tensor([0, 4, 7]), torch.tensor([4, 3, 5]), torch.tensor([1, -1, 0])
TOKENS, FAN_IN, RANK, FAN_OUT = 12, 16, 4, 10
WITH_LORA = [i for i in range(TOKENS) if not 4 <= i < 7]


def _tensors():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(TOKENS, FAN_IN, generator=gen)
    a = torch.randn(2, 1, RANK, FAN_IN, generator=gen)
    b = torch.randn(2, 1, FAN_OUT - 2, RANK, generator=gen)  # one slice: FAN_OUT - 2 wide, at offset 2
    base = torch.randn(TOKENS, FAN_OUT, generator=gen)
    return x, a, b, base


def _lora_out(shrink, expand_slice):
    x, a, b, base = _tensors()
    shrunk, out = torch.zeros(TOKENS, RANK), base.clone()
    meta = (STARTS, LENS, SLOTS, 3, 5, TOKENS)
    shrink(x, a, shrunk, *meta, 0.5)
    expand_slice(shrunk, b, out, *meta, 2, FAN_OUT - 2, True)
    return out, base


def test_grouped_ops_add_what_vllms_add_for_every_request_with_a_lora():
    cpu_lora.apply("vllm")
    from vllm.lora.punica_wrapper import punica_cpu

    expected, _ = _lora_out(ops.sgmv_shrink, ops.sgmv_expand_slice)
    cpu_lora.apply("grouped")
    try:
        got, base = _lora_out(punica_cpu.sgmv_shrink, punica_cpu.sgmv_expand_slice)
    finally:
        cpu_lora.apply("vllm")
    assert torch.allclose(got[WITH_LORA], expected[WITH_LORA], atol=1e-5)
    assert torch.equal(got[4:7], base[4:7])  # no LoRA: the base projection's output is left as it was
    assert torch.equal(got[:, :2], base[:, :2])  # outside the slice nothing moves


def test_vllm_mode_puts_vllms_own_ops_back():
    from vllm.lora.punica_wrapper import punica_cpu

    cpu_lora.apply("grouped")
    assert punica_cpu.sgmv_shrink is not ops.sgmv_shrink
    cpu_lora.apply("vllm")
    assert (punica_cpu.sgmv_shrink, punica_cpu.sgmv_expand, punica_cpu.sgmv_expand_slice) == (
        ops.sgmv_shrink, ops.sgmv_expand, ops.sgmv_expand_slice)


def test_the_plugin_only_acts_when_the_environment_names_a_mode(monkeypatch):
    from vllm.lora.punica_wrapper import punica_cpu

    monkeypatch.delenv(cpu_lora.MODE_ENV, raising=False)
    cpu_lora.register()
    assert punica_cpu.sgmv_shrink is ops.sgmv_shrink
    monkeypatch.setenv(cpu_lora.MODE_ENV, "grouped")
    cpu_lora.register()
    try:
        assert punica_cpu.sgmv_shrink is not ops.sgmv_shrink
    finally:
        cpu_lora.apply("vllm")


def test_coplay_registers_the_plugin_with_vllm():
    from importlib.metadata import entry_points

    names = {ep.value for ep in entry_points(group="vllm.general_plugins")}
    assert "coplay.engines.cpu_lora:register" in names
