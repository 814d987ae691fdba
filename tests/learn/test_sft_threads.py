"""The cold start trains with the machine's cores: Ray starts a learner rank with one torch thread (its one
CPU slot), which on a 2-core machine doubled the SmolLM2 cold start; during SFT nothing else runs."""

import os

import pytest
import torch

from coplay.actors.learner_group import sft_thread_count, torch_threads
from coplay.config import ConfigError, CoplayConfig


def test_the_cores_are_shared_by_the_ranks_unless_configured():
    cpus = len(os.sched_getaffinity(0))
    assert sft_thread_count(None, 1) == cpus
    assert sft_thread_count(None, cpus * 4) == 1  # never zero threads
    assert sft_thread_count(3, 1) == 3


def test_threads_are_restored_after_the_block_even_when_it_fails():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), torch_threads(before + 1):
        assert torch.get_num_threads() == before + 1
        raise RuntimeError("a failing SFT chunk")
    assert torch.get_num_threads() == before


def test_sft_threads_is_validated():
    assert CoplayConfig.model_validate({"sft": {"threads": 2}}).sft.threads == 2
    with pytest.raises((ConfigError, ValueError)):
        CoplayConfig.model_validate({"sft": {"threads": 0}})


def test_no_count_leaves_the_threads_alone():
    before = torch.get_num_threads()
    with torch_threads(None):
        assert torch.get_num_threads() == before
    assert torch.get_num_threads() == before
