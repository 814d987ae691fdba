"""The GRPO loss on hand examples: ratio 1, clip boundaries, k3 KL, the three aggregations."""

from __future__ import annotations

import math

import pytest
import torch

from coplay.learn.grpo import aggregation_weights, grpo_loss


def _t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def test_ratio_one_gives_minus_mean_advantage():
    lp = _t([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]])
    mask = _t([[1, 1, 0], [1, 0, 0]])
    adv = _t([2.0, -1.0])
    parts = grpo_loss(lp, lp.clone(), adv, mask)
    # token-mean over 3 tokens: -(2 + 2 - 1) / 3
    assert parts.loss.item() == pytest.approx(-1.0)
    assert parts.ratio_mean.item() == pytest.approx(1.0)
    assert parts.clip_fraction.item() == 0.0


def test_gradient_at_ratio_one_is_minus_advantage_weighted():
    lp = _t([[-1.0, -2.0]]).requires_grad_(True)
    parts = grpo_loss(lp, lp.detach().clone(), _t([3.0]), _t([[1, 1]]))
    parts.loss.backward()
    assert lp.grad[0].tolist() == pytest.approx([-1.5, -1.5])  # d(-A * ratio)/dlogp / 2 tokens


@pytest.mark.parametrize(
    ("ratio", "adv", "expected"),
    [
        (1.5, 1.0, -1.28),  # positive advantage: clipped at 1 + eps_high
        (1.28, 1.0, -1.28),  # exactly at the boundary
        (1.1, 1.0, -1.1),  # inside: unclipped
        # positive advantage, ratio below 1 - eps_low: min keeps the unclipped (smaller) term
        (0.5, 1.0, -0.5),
        (0.5, -1.0, 0.8),  # negative advantage: clipped at 1 - eps_low
        (0.8, -1.0, 0.8),  # boundary
        (1.5, -1.0, 1.5),  # negative advantage, large ratio: unclipped (pessimistic) term
    ],
)
def test_asymmetric_clip_boundaries(ratio, adv, expected):
    lp = _t([[math.log(ratio)]]).requires_grad_(True)
    parts = grpo_loss(lp, _t([[0.0]]), _t([adv]), _t([[1]]), eps_low=0.2, eps_high=0.28)
    assert parts.loss.item() == pytest.approx(expected)
    parts.loss.backward()
    clipped = expected in (-1.28, 0.8) and not math.isclose(ratio, 1.28) and not math.isclose(ratio, 0.8)
    if clipped:
        assert lp.grad.item() == 0.0  # no gradient through the clipped branch
    else:
        assert lp.grad.item() != 0.0


def test_k3_kl_value():
    lp = _t([[math.log(0.5), math.log(0.25)]])
    ref = _t([[math.log(0.25), math.log(0.25)]])
    mask = _t([[1, 1]])
    parts = grpo_loss(lp, lp.clone(), _t([0.0]), mask, beta=0.1, ref_logprobs=ref)
    # token 1: d = log(0.25/0.5) = -log 2 -> e^d - d - 1 = 0.5 + log 2 - 1; token 2: 0
    k3 = 0.5 + math.log(2) - 1
    assert parts.kl.item() == pytest.approx(k3 / 2)
    assert parts.loss.item() == pytest.approx(0.1 * k3 / 2)
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo_loss(lp, lp.clone(), _t([0.0]), mask, beta=0.1)
    assert grpo_loss(lp, lp.clone(), _t([0.0]), mask, beta=0.0).kl.item() == 0.0


def test_aggregations_on_a_hand_example():
    # per-token losses via ratio 1: loss_it = -A_i; seq 1 has 3 tokens with A=1, seq 2 has 1 token with A=3
    lp = torch.zeros(2, 3, dtype=torch.float64)
    mask = _t([[1, 1, 1], [1, 0, 0]])
    adv = _t([1.0, 3.0])
    token_mean = grpo_loss(lp, lp, adv, mask, loss_agg="token-mean").loss.item()
    seq_mean = grpo_loss(lp, lp, adv, mask, loss_agg="seq-mean-token-mean").loss.item()
    sum_norm = grpo_loss(lp, lp, adv, mask, loss_agg="seq-mean-token-sum-norm", token_norm=4).loss.item()
    assert token_mean == pytest.approx(-(1 + 1 + 1 + 3) / 4)
    assert seq_mean == pytest.approx(-(1 + 3) / 2)
    assert sum_norm == pytest.approx(-((3 * 1) / 4 + (1 * 3) / 4) / 2)
    with pytest.raises(ValueError, match="token_norm"):
        aggregation_weights([3, 1], "seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="aggregation"):
        aggregation_weights([3, 1], "mean")


def test_micro_batches_with_global_weights_sum_to_the_full_batch_loss():
    gen = torch.Generator().manual_seed(0)
    lp = torch.randn(4, 5, generator=gen, dtype=torch.float64)
    beh = lp + 0.3 * torch.randn(4, 5, generator=gen, dtype=torch.float64)
    mask = _t([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 1, 0, 0]])
    adv = _t([1.0, -0.5, 2.0, -1.0])
    for mode in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"):
        full = grpo_loss(lp, beh, adv, mask, loss_agg=mode, token_norm=5).loss
        w = _t(aggregation_weights([5, 2, 1, 3], mode, token_norm=5))
        halves = sum(grpo_loss(lp[s], beh[s], adv[s], mask[s], token_weights=w[s]).loss
                     for s in (slice(0, 2), slice(2, 4)))
        assert halves.item() == pytest.approx(full.item(), rel=1e-12)
