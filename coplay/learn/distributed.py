"""The torch.distributed group the learner's ranks form (gloo on CPU, nccl on GPU).

Launched by `torchrun` (or a Ray learner group setting RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT), the
group comes from the environment; a lone process with none of them gets a one-rank group on loopback, so
DeepSpeed never falls back to MPI discovery. Imports torch only.
"""

from __future__ import annotations

import os
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_backend() -> str:
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def ensure_process_group(backend: str | None = None) -> tuple[int, int]:
    """Join (or create) the default process group; returns (rank, world_size)."""
    import torch.distributed as dist

    if not dist.is_initialized():
        backend = backend or default_backend()
        if "WORLD_SIZE" in os.environ and "RANK" in os.environ:
            os.environ.setdefault("LOCAL_RANK", os.environ["RANK"])
            dist.init_process_group(backend=backend, init_method="env://")
        else:  # a lone process: a one-rank group on loopback; DeepSpeed's engine reads LOCAL_RANK
            os.environ.setdefault("LOCAL_RANK", "0")
            dist.init_process_group(backend=backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                                    world_size=1)
    return dist.get_rank(), dist.get_world_size()


def all_reduce_sum(values: list[float]) -> list[float]:
    """Sum a few floats over the ranks (identity on one rank)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()
