"""Env processes (`rollout.env_processes`): single-player envs that live and step in child processes.

Why: env threads (`rollout.env_threads`) take a CPU-heavy env's steps off the worker's event loop, but the
steps still share the worker's interpreter: on 2 cores Mario's emulator calls waited for the GIL and a core
(21 s of env calls per iteration against 2.5 s in the loop, `benchmarks/e2e.py` side cases). A host process
runs its envs' `reset` and `step` under its own interpreter, so emulation overlaps generation and other
hosts' emulation for real. The model calls stay in the worker; only the env moves.

How: `EnvHosts(n)` starts n spawned processes (spawn: the worker has threads and an engine, which fork
would copy) that each hold any number of envs by id. `make` places a new env on the host with the fewest
live envs and returns a `RemoteEnv` whose `reset`, `step` and `close` are blocking calls over a pipe (one
call at a time per host, under a lock); the runner makes them on its env threads, so the event loop never
waits. A host stays up across rollout calls (the worker keeps `EnvHosts`), and exits when its pipe closes,
so a worker that dies takes its hosts with it. An exception inside a host comes back as `EnvProcessError`
with the host's traceback; a host that died raises it too and is started again on the next `make`.
Only gymnasium-API games (single-player) are hosted: the AEC and parallel games are driven through more
of their env's surface than these three calls, and they are light to step.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any


class EnvProcessError(RuntimeError):
    """An env call failed in its host process (the message carries the host's traceback), or the host died."""


def _serve(conn: Connection) -> None:
    """A host's loop: ("make", id, game, kwargs) | ("call", id, method, args, kwargs) | ("close", id)."""
    from coplay_envs import make_env

    envs: dict[int, Any] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the worker closed the pipe or died
            break
        op, env_id = message[0], message[1]
        try:
            if op == "make":
                envs[env_id] = make_env(message[2], **message[3])
                result = None
            elif op == "call":
                result = getattr(envs[env_id], message[2])(*message[3], **message[4])
            else:  # close
                env = envs.pop(env_id, None)
                result = env.close() if env is not None else None
            conn.send(("ok", result))
        except Exception:  # noqa: BLE001 - any env error goes back to the caller, with its traceback
            conn.send(("error", traceback.format_exc()))
    for env in envs.values():
        env.close()


class _Host:
    def __init__(self, context: Any) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), daemon=True, name="coplay-env-host")
        self.process.start()
        child.close()
        self.lock = threading.Lock()
        self.live = 0

    def call(self, *message: Any) -> Any:
        with self.lock:
            try:
                self.conn.send(message)
                status, result = self.conn.recv()
            except (EOFError, OSError) as exc:  # OSError covers a broken pipe
                raise EnvProcessError(f"env host process {self.process.pid} died "
                                      f"(exit code {self.process.exitcode})") from exc
        if status == "error":
            raise EnvProcessError(f"env call {message[0]} {message[2] if message[0] == 'call' else ''} "
                                  f"failed in host process {self.process.pid}:\n{result}")
        return result

    def stop(self) -> None:
        self.conn.close()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()


class RemoteEnv:
    """A hosted env: `reset`, `step`, `close` as the env's own (blocking; run them off the event loop)."""

    def __init__(self, hosts: EnvHosts, host: _Host, env_id: int) -> None:
        self._hosts, self._host, self._id = hosts, host, env_id

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        return self._host.call("call", self._id, "reset", args, kwargs)

    def step(self, *args: Any, **kwargs: Any) -> Any:
        return self._host.call("call", self._id, "step", args, kwargs)

    def close(self) -> None:
        self._hosts.release(self._host)
        if self._host.process.is_alive():
            self._host.call("close", self._id)


class EnvHosts:
    """`n` env host processes (module docstring)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"env_processes={n}: need at least one host")
        self._context = mp.get_context("spawn")
        self._hosts = [_Host(self._context) for _ in range(n)]
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def make(self, game: str, **kwargs: Any) -> RemoteEnv:
        """A new env of `game` on the least-loaded live host (a dead host is replaced first)."""
        with self._lock:
            for i, host in enumerate(self._hosts):
                if not host.process.is_alive():
                    self._hosts[i] = _Host(self._context)
            host = min(self._hosts, key=lambda h: h.live)
            host.live += 1
            env_id = next(self._ids)
        try:
            host.call("make", env_id, game, kwargs)
        except EnvProcessError:
            self.release(host)
            raise
        return RemoteEnv(self, host, env_id)

    def release(self, host: _Host) -> None:
        with self._lock:
            host.live = max(0, host.live - 1)

    @property
    def pids(self) -> list[int]:
        return [h.process.pid for h in self._hosts if h.process.pid is not None]

    def close(self) -> None:
        for host in self._hosts:
            host.stop()
