"""A checker that makes "NCCL refuses this tensor" fail on a CPU machine, and a learner scenario run under it.

NCCL reduces only CUDA tensors of the rank's own device; gloo happily reduces CPU tensors. So a collective on
a tensor built on the CPU (a metric, a path) passes every CPU test and stops a GPU run at its first call.
`pretend_nccl()` closes that gap on a machine without a GPU, inside a real gloo group:
- `torch.distributed.get_backend()` answers "nccl" and `torch.cuda.current_device()` answers 0, so code that
  asks where its tensors must go gets the GPU answer;
- `PretendCudaMode` turns every tensor made or moved to a CUDA device into a `PretendCuda` tensor: a wrapper
  that reports `cuda:0` and keeps its data in a CPU tensor (ops on it run on that CPU tensor);
- every collective in `CHECKED` is wrapped: it raises `CollectiveDeviceError` unless each of its tensors is
  on cuda:<current device> (a barrier must name `device_ids`, an object collective its CUDA `device`), and
  otherwise runs the real gloo collective on the CPU data underneath.

Run as a script under `torchrun --nproc_per_node=2` it drives the learner's distributed code (plain torch
backend: SFT batches, a GRPO step, a checkpoint save and load) under the checker and writes what it saw.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

PRETEND_DEVICE = torch.device("cuda", 0)
CHECKED = ("all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce", "reduce_scatter",
           "reduce_scatter_tensor", "gather", "scatter", "all_to_all", "all_to_all_single", "send", "recv",
           "barrier", "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list")
OBJECT_COLLECTIVES = ("broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list")


class CollectiveDeviceError(RuntimeError):
    """A collective whose tensors are not where the backend takes them (NCCL: cuda:<current device>)."""


class PretendCuda(torch.Tensor):
    """A tensor that reports `PRETEND_DEVICE` and holds its data in the CPU tensor `inner`."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> PretendCuda:
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=PRETEND_DEVICE,
                                                   requires_grad=False)

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        leaves_cpu = kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "cpu"
        if kwargs.get("device") is not None:
            kwargs["device"] = torch.device("cpu")
        out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        if func._schema.name.endswith("_") or "copy_" in func._schema.name:  # in place: the argument itself
            return args[0]
        if leaves_cpu:
            return out
        return tree_map(lambda x: PretendCuda(x) if isinstance(x, torch.Tensor) else x, out)


def _unwrap(x: Any) -> Any:
    return x.inner if isinstance(x, PretendCuda) else x


def _is_cuda(device: Any) -> bool:
    return device is not None and torch.device(device).type == "cuda"


class PretendCudaMode(TorchFunctionMode):
    """Tensors made with `device=cuda...` or moved with `.to(cuda...)` / `.cuda()` become `PretendCuda`."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.to, torch.Tensor.cuda) and not isinstance(args[0], PretendCuda):
            target = kwargs.pop("device", None)
            rest = []
            for a in args[1:]:
                if isinstance(a, (str, torch.device)):
                    target = a
                else:
                    rest.append(a)
            if func is torch.Tensor.cuda or _is_cuda(target):
                dtype = kwargs.get("dtype") or next((a for a in rest if isinstance(a, torch.dtype)), None)
                data = args[0].detach().to(dtype) if dtype is not None else args[0].detach()
                return PretendCuda(data.clone())
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
            return PretendCuda(func(*args, **kwargs))
        return func(*args, **kwargs)


def _check(name: str, args: tuple, kwargs: dict) -> list[str]:
    """The devices of a collective's tensors; raises unless NCCL would take them."""
    want = torch.device("cuda", torch.cuda.current_device())
    if name == "barrier":
        if not kwargs.get("device_ids"):
            raise CollectiveDeviceError("barrier without device_ids: under NCCL torch guesses the device "
                                        "from the rank number")
        return [f"cuda:{i}" for i in kwargs["device_ids"]]
    if name in OBJECT_COLLECTIVES:
        device = kwargs.get("device")
        if device is None or torch.device(device) != want:
            raise CollectiveDeviceError(f"{name} with device={device!r}: NCCL needs the objects' bytes "
                                        f"on {want}")
        return [str(torch.device(device))]
    tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
    bad = [str(t.device) for t in tensors if t.device != want]
    if bad or not tensors:
        raise CollectiveDeviceError(f"{name} on tensors on {bad or 'nothing'}: NCCL takes only tensors "
                                    f"on {want}")
    return [str(t.device) for t in tensors]


def _real_call(name: str, real: Any, args: tuple, kwargs: dict) -> Any:
    """The gloo collective on the CPU data under the pretend tensors."""
    kwargs = dict(kwargs)
    if name == "barrier":
        kwargs.pop("device_ids", None)
    if name in OBJECT_COLLECTIVES:  # the object lists themselves: the collective fills them in place
        kwargs["device"] = torch.device("cpu")
        return real(*args, **kwargs)
    return real(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))


@contextlib.contextmanager
def pretend_nccl(log: list[dict[str, Any]]) -> Iterator[None]:
    """Inside: the default (gloo) group answers as NCCL and every checked collective is checked; each call
    that passes is appended to `log` as {"op", "devices"}."""
    saved = {name: getattr(dist, name) for name in (*CHECKED, "get_backend")}
    saved_current = torch.cuda.current_device

    def wrap(name: str) -> Any:
        real = saved[name]

        def checked(*args: Any, **kwargs: Any) -> Any:
            devices = _check(name, args, kwargs)
            log.append({"op": name, "devices": devices})
            return _real_call(name, real, args, kwargs)

        return checked

    for name in CHECKED:
        setattr(dist, name, wrap(name))
    dist.get_backend = lambda group=None: "nccl"
    torch.cuda.current_device = lambda: 0
    try:
        with PretendCudaMode():
            yield
    finally:
        for name, fn in saved.items():
            setattr(dist, name, fn)
        torch.cuda.current_device = saved_current


SFT_EXAMPLES = [([{"role": "user", "content": f"board {i}: which move?"}],
                 f"ACTION: {'up' if i % 2 else 'left'}") for i in range(4)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", required=True, help="the tiny model's cache folder")
    parser.add_argument("--ckpt", required=True, help="checkpoint folder (shared by the ranks)")
    parser.add_argument("--out", required=True, help="JSON file per rank: <out>.rank<r>")
    args = parser.parse_args()
    from safetensors.torch import save_file
    from scenarios import batch, make_learner, snapshot

    from coplay.learn.distributed import ensure_process_group
    from coplay.learn.sft import SftSession

    rank, _ = ensure_process_group()
    log: list[dict[str, Any]] = []
    with pretend_nccl(log):
        try:  # the checker itself: a CPU tensor on the (pretend) NCCL group must be refused
            dist.all_reduce(torch.zeros(1, dtype=torch.float64))
            refused_cpu = False
        except CollectiveDeviceError:
            refused_cpu = True
        learner = make_learner(args.cache, "torch")
        sft = SftSession(learner, [("act", SFT_EXAMPLES, 1)], lr=1e-3, batch_size=4)
        sft_losses = [loss for _, loss in sft.run()]
        metrics = learner.train_step(*batch(1, ("act", "curator")))
        learner.save_checkpoint(args.ckpt)
        learner.load_checkpoint(args.ckpt)
    result = {"rank": rank, "refused_cpu": refused_cpu, "collectives": log, "sft_losses": sft_losses,
              "grpo_loss": {a: m["loss"] for a, m in metrics.adapters.items()}}
    with open(f"{args.out}.rank{rank}", "w") as f:
        json.dump(result, f)
    save_file(snapshot(learner), f"{args.out}.rank{rank}.safetensors")


if __name__ == "__main__":
    main()
