"""Starting or joining Ray for a run, with a bounded wait and one clear line when it cannot.

`cluster.address` unset: a fresh local instance on loopback (`coplay.security.ray_init_kwargs`), never an
existing one. Set (`auto`, `host:port`): the address is resolved the way Ray resolves it, then probed with a
TCP connect bounded by `cluster.connect_timeout_s` before `ray.init` runs, because `ray.init` against a GCS
that does not answer retries for a long time and cannot be interrupted while it does. `ray://` client
addresses are passed through unprobed (the client has its own timeout).
"""

from __future__ import annotations

import os
import socket
import warnings
from typing import Any

import ray

from coplay.config import ClusterConfig
from coplay.driver.progress import phase
from coplay.security import ray_init_kwargs


class ClusterConnectError(RuntimeError):
    """Ray could not be joined; the message says which address and what to change."""


def resolve_address(address: str) -> str | None:
    """`host:port` of the GCS that `address` names (`auto`: the RAY_ADDRESS variable, else the cluster last
    started on this machine with `ray start`); None when `auto` finds none."""
    from ray._private.services import canonicalize_bootstrap_address

    try:
        return canonicalize_bootstrap_address(address)
    except ConnectionError:  # auto, and no cluster recorded on this machine
        return None


def probe(host_port: str, timeout_s: float) -> str | None:
    """None when something accepts TCP connections at `host_port` within `timeout_s`, else why not."""
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__


def start_ray(cluster: ClusterConfig, verbose: bool = False) -> None:
    """`ray.init` for a run: local and fresh unless `cluster.address`; `ClusterConnectError` in at most
    `cluster.connect_timeout_s` seconds when the configured cluster does not answer."""
    kwargs = ray_init_kwargs(cluster)
    address = cluster.address
    if address is not None and not address.startswith("ray://"):
        target = resolve_address(address)
        hint = "unset cluster.address (or pass cluster.address=null) to start a local Ray instead"
        if target is None:
            raise ClusterConnectError(f"cluster.address={address}: no running Ray cluster found on this "
                                      f"machine; {hint}")
        problem = probe(target, cluster.connect_timeout_s)
        if problem is not None:
            raise ClusterConnectError(f"cluster.address={address}: the Ray cluster at {target} does not "
                                      f"answer within {cluster.connect_timeout_s:g} s ({problem}); {hint}")
        kwargs["address"] = target
    try:
        with phase("start-up: Ray" + (f" at {kwargs['address']}" if "address" in kwargs else "")):
            ray.init(**kwargs, logging_level="INFO" if verbose else "WARNING")
    except ConnectionError as exc:
        raise ClusterConnectError(f"cluster.address={address}: {str(exc).splitlines()[0]}") from None


def actor_options(cluster: ClusterConfig) -> dict[str, Any]:
    """`.options(**actor_options(cluster))` for the CPU-heavy actors (learner ranks, rollout workers): their
    `OMP_WAIT_POLICY` (`cluster.omp_wait_policy`). With OpenMP's default, a learner step's threads spin at
    every barrier while a descheduled partner runs rollouts on the same cores: on 2 cores beside a busy
    neighbour a SmolLM2 step took 96-101 s, and 10.6-26 s with PASSIVE (`benchmarks/learner_speed.py
    --contend 2`, benchmarks/results/learner-speed-smollm2-contended-threads*.json). Ray merges these
    `env_vars` into the job's runtime env (a submitted job keeps its working_dir); a value already in the
    driver's environment wins (local workers inherit it)."""
    if cluster.omp_wait_policy is None or "OMP_WAIT_POLICY" in os.environ:
        return {}
    return {"runtime_env": {"env_vars": {"OMP_WAIT_POLICY": cluster.omp_wait_policy}}}


def named_actor(actor: Any) -> Any:
    """An actor handle, given the handle or the actor's name (in this job's namespace). A run's restartable
    actors take one another by name: Ray keeps an actor handle passed to a constructor as an object-store
    argument, which may be gone when the actor restarts (Ray issue 53727), and logs an error line saying so
    for every actor with `max_restarts > 0`."""
    return ray.get_actor(actor) if isinstance(actor, str) else actor


def actor_restarted() -> bool:
    """Whether the calling actor is a restart (Ray's `was_current_actor_reconstructed`). Ray 2.60's property
    reads the runtime context's own deprecated `actor_id` and so prints a RayDeprecationWarning into every
    actor's log: coplay calls no deprecated API here, so that one warning is silenced, only around it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)
