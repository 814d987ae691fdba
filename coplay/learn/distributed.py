"""The torch.distributed group the learner's ranks form (gloo on CPU, nccl on GPU).

Three ways in:
- Ray's LearnerGroup (`coplay.actors.learner_group`): rank 0 opens a listening socket on *its own* node
  (`open_rendezvous`; 127.0.0.1 in a local run) and reports that address and port; every rank then calls
  `join_process_group`, rank 0 handing the already-bound socket to its TCPStore (`master_listen_fd`), so
  the store listens exactly where it was reported (a plain `TCPStore` binds every interface) and no other
  process can take the port in between. On a cluster the driver's node (often a head without GPUs) plays
  no part. OpenRLHF and verl form their groups the same way (rank 0's node address and a free port).
- `torchrun` (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment): `ensure_process_group`.
- A lone process with none of them: a one-rank group on loopback, so DeepSpeed never falls back to MPI
  discovery.

Every collective coplay issues itself goes through the helpers at the end (`all_reduce_`, `all_reduce_sum`,
`barrier`, `broadcast_object`), which put the tensors where the group's backend takes them
(`collective_device`): NCCL reduces only CUDA tensors of the rank's own device and refuses a CPU tensor at
the first call, gloo reduces CPU tensors. A metric built on the CPU or a gradient on the learner's device
thus travels the same way on one GPU rank, two GPU ranks or two CPU ranks. (DeepSpeed's collectives are its
own and already on its accelerator's device.) tests/learn/test_collective_devices.py runs the learner's
distributed code under a checker that pretends the backend is NCCL. Imports torch (and psutil, to name the
loopback interface) only.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from typing import Any

LOOPBACK = "127.0.0.1"
RENDEZVOUS_TIMEOUT_S = 600.0
# what `join_process_group` exports (DeepSpeed reads them); a child process must not inherit them
RENDEZVOUS_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                  "GLOO_SOCKET_IFNAME")


def lone_process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the rendezvous variables, plus `extra`: the environment for a
    child that trains on its own. A process that joined a group (an in-process `Learner`) carries
    RANK / WORLD_SIZE / MASTER_PORT; a child that inherits them takes itself for rank 0 of that group and
    fails to listen on the port its parent's store holds (EADDRINUSE)."""
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS_ENV}
    return {**env, **(extra or {})}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def open_rendezvous(host: str) -> socket.socket:
    """A listening TCP socket on `host` (rank 0's node address) at a port the OS picks; the caller keeps it
    open until `join_process_group` hands it to the store."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, 0))
    listener.listen(128)
    return listener


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


def interface_holding(address: str) -> str | None:
    """The name of the network interface holding `address` (`lo` for 127.0.0.1 on Linux), or None."""
    import psutil

    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    bare = address.split("%")[0]
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == family and a.address.split("%")[0] == bare for a in addresses):
            return name
    return None


def loopback_interface() -> str | None:
    """The name of the network interface holding 127.0.0.1 (`lo` on Linux), or None."""
    return interface_holding(LOOPBACK)


def socket_interface_env(node_addr: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME for a rank on a node whose Ray address is `node_addr`: the
    interface holding that address, which the other nodes reach (Ray's own traffic uses it), for each
    variable `environ` (default: this process's environment) does not set already; an operator's value
    wins. Without it NCCL takes the first interface that is not loopback or docker, which on a node with
    several (a second NIC, a virtual bridge, a CNI's veth) may be one the other nodes cannot reach: the
    group then hangs at its first collective instead of failing."""
    environ = os.environ if environ is None else environ
    interface = interface_holding(node_addr)
    if interface is None:
        return {}
    return {key: interface for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") if not environ.get(key)}


def join_process_group(rank: int, world_size: int, master_addr: str, master_port: int,
                       listener: socket.socket | None = None, backend: str | None = None,
                       timeout_s: float = RENDEZVOUS_TIMEOUT_S, node_addr: str | None = None) -> Any:
    """Join the default process group at rank 0's reported address. Rank 0 passes the socket it reported
    (`open_rendezvous`), which its TCPStore then serves on. When the address is loopback (a local run) the
    gloo transport is pinned to the loopback interface too (`GLOO_SOCKET_IFNAME`, torch's own switch;
    otherwise gloo listens on whatever address the host name resolves to). On a cluster, `node_addr` (this
    rank's node address) pins NCCL's and gloo's sockets to its interface unless the environment names one
    (`socket_interface_env`). Returns the store, which owns the socket from then on (`detach`: Python no
    longer closes it)."""
    import torch.distributed as dist

    if dist.is_initialized():
        raise RuntimeError("this process already belongs to a process group")
    if (rank == 0) != (listener is not None):
        raise ValueError("rank 0, and only rank 0, passes the listening socket it reported")
    backend = backend or default_backend()
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": os.environ.get("LOCAL_RANK", "0"),
                       "WORLD_SIZE": str(world_size), "MASTER_ADDR": master_addr,
                       "MASTER_PORT": str(master_port)})
    if is_loopback(master_addr):
        interface = loopback_interface()
        if interface is not None:
            os.environ["GLOO_SOCKET_IFNAME"] = interface
    elif node_addr is not None:
        os.environ.update(socket_interface_env(node_addr))
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(master_addr, master_port, world_size, rank == 0, timeout=timeout,
                          wait_for_workers=False,
                          master_listen_fd=listener.detach() if listener is not None else None)
    dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    return store


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
            listener = open_rendezvous(LOOPBACK)
            join_process_group(0, 1, LOOPBACK, listener.getsockname()[1], listener, backend)
    return dist.get_rank(), dist.get_world_size()


# the device type each backend reduces (torch names a mixed group "cpu:gloo,cuda:nccl")
BACKEND_DEVICE = {"nccl": "cuda", "gloo": "cpu", "mpi": "cpu", "ucc": "cpu"}


def backend_device_types(backend: str) -> tuple[str, ...]:
    """The device types whose tensors `backend` takes: one for a plain backend name, one per entry of a
    device map such as "cpu:gloo,cuda:nccl"."""
    if ":" in backend:
        return tuple(part.split(":")[0].strip() for part in backend.split(","))
    if backend not in BACKEND_DEVICE:
        raise ValueError(f"torch.distributed backend {backend!r}: unknown; expected one of "
                         f"{sorted(BACKEND_DEVICE)} or a device map like 'cpu:gloo,cuda:nccl'")
    return (BACKEND_DEVICE[backend],)


def _several_ranks() -> bool:
    import torch.distributed as dist

    return dist.is_initialized() and dist.get_world_size() > 1


def collective_device(tensor: Any = None) -> Any:
    """The `torch.device` a collective on the default group must use: `tensor`'s own device when the
    backend takes it (no copy), else the backend's first device type; CUDA means this rank's current device
    (the learner sets it from LOCAL_RANK), which NCCL requires."""
    import torch
    import torch.distributed as dist

    types = backend_device_types(str(dist.get_backend()))
    if tensor is not None and tensor.device.type in types:
        return tensor.device
    if types[0] == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(types[0])


def all_reduce_(tensor: Any) -> None:
    """Sum `tensor` over the ranks in place (nothing on one rank), through the backend's device: a tensor
    elsewhere is copied there, reduced, and copied back."""
    import torch.distributed as dist

    if not _several_ranks():
        return
    device = collective_device(tensor)
    if tensor.device == device:
        dist.all_reduce(tensor)
        return
    moved = tensor.to(device)
    dist.all_reduce(moved)
    tensor.copy_(moved)


def all_reduce_sum(values: list[float]) -> list[float]:
    """Sum a few floats over the ranks (identity on one rank), in float64 on the backend's device."""
    import torch

    if not _several_ranks():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=collective_device())
    all_reduce_(t)
    return t.cpu().tolist()


def barrier() -> None:
    """Wait for every rank (nothing on one rank). Under NCCL the barrier is a collective on a CUDA tensor:
    naming this rank's device keeps torch from guessing one from the rank number."""
    import torch.distributed as dist

    if not _several_ranks():
        return
    device = collective_device()
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """`obj` as rank `src` holds it, on every rank (itself on one rank). The pickled bytes travel as a
    tensor on the backend's device."""
    import torch.distributed as dist

    if not _several_ranks():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src, device=collective_device())
    return box[0]
