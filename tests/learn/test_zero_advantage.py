"""`learner.skip_zero_advantage`: a GRPO group without reward variance gives every sample advantage 0; with no
KL term those samples carry no gradient, so the step may leave them out and save their forward/backward."""

from __future__ import annotations

from coplay.driver.batch import nonzero_advantages, trained_samples
from coplay.types import Sample


def _sample(i: int, adapter: str = "act") -> Sample:
    return Sample(adapter, 1, [1, 2], [3], [-0.5], group_id=f"g{i // 2}", sample_id=f"s{i}")


def test_only_samples_with_a_nonzero_advantage_are_trained_when_skipping():
    samples = [_sample(i) for i in range(4)] + [_sample(4, "retrieve")]
    advantages = {"s0": 0.7, "s1": -0.7, "s2": 0.0, "s3": 0.0, "s4": 0.0}
    assert trained_samples(samples, advantages, skip_zero=False) == samples
    kept = trained_samples(samples, advantages, skip_zero=True)
    assert [s.sample_id for s in kept] == ["s0", "s1"]
    assert nonzero_advantages(samples, advantages) == {"act": 2}
