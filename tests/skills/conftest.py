"""Fixtures of the skill-bank tests: a small bank learned from the synthetic behaviours
(tests/skills/synthetic.py). The tiny model's callers (`tiny_caller`, `constrained_tiny_caller`) are in
tests/conftest.py: the curriculum tests share them."""

from __future__ import annotations

import pytest

from coplay.config import SkillBankConfig
from coplay.skills import Bank, update_bank
from tests.skills.synthetic import shard


@pytest.fixture(scope="module")
def two_skill_bank() -> Bank:
    """The deterministic bank of 8 synthetic episodes: two skills (MERGE: x rises; BUILD: y falls)."""
    bank, _, _ = update_bank(Bank("2048"), shard(8), None, SkillBankConfig(), iteration=1)
    assert len(bank.skills) == 2
    return bank
