"""Where the learner's ranks run on a cluster: GPUs per rank and the strategy of their placement group. The
base of `ClusterConfig` (`tree.py`), kept in its own module so the tree stays small. Imports only pydantic.

Why whole GPUs: a learner rank trains on one device, and the ranks' NCCL group needs each rank on a device
of its own; two ranks on one GPU (0.5 each) make NCCL stop at its first collective ("Duplicate GPU
detected"), and a second GPU per rank would sit idle. Why STRICT_PACK by default: the ranks all-reduce
gradients every step, and on one node that runs over NVLink or PCIe; PACK only *prefers* one node and may
split the ranks over nodes without a word, putting every all-reduce on the network (docs/platform.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from coplay.config.base import Section

# Ray's placement-group strategies (ray.util.placement_group)
LearnerPlacementStrategy = Literal["STRICT_PACK", "PACK", "SPREAD", "STRICT_SPREAD"]


class LearnerPlacement(Section):
    """The learner ranks' share of `cluster`: GPUs per rank and how the ranks' bundles are placed."""

    learner_rank_gpus: float | None = Field(
        None, ge=0.0,
        description="GPUs per learner rank: 1 (a GPU of its own) or 0 (a CPU slot); None: 1 on a cluster "
                    "with GPUs, else 0. Fractions are refused: NCCL needs one device per rank")
    learner_placement: LearnerPlacementStrategy = Field(
        "STRICT_PACK",
        description="Ray placement strategy of the learner ranks' bundles: STRICT_PACK puts all ranks on one "
                    "node (all-reduce over NVLink/PCIe) and waits until one node has room; PACK may split "
                    "them over nodes (all-reduce over the network: set NCCL_SOCKET_IFNAME, docs/platform.md)")
    learner_placement_timeout_s: float = Field(
        600.0, gt=0.0,
        description="how long to wait for the learner's placement group (an autoscaler may be starting "
                    "nodes) before stopping with what it asked for and what the largest node has")

    @field_validator("learner_rank_gpus")
    @classmethod
    def _whole_gpu(cls, value: float | None) -> float | None:
        if value is not None and value not in (0, 1):
            raise ValueError(f"learner_rank_gpus={value}: a learner rank takes 1 GPU (a device of its own) "
                             f"or 0 (a CPU slot); ranks sharing a GPU make NCCL fail, and a rank trains on "
                             f"one device (more GPUs: raise learner.ranks)")
        return value
