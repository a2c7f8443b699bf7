"""Program, nodes, handles and the forking launcher of the launchpad stand-in (see the package docstring)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import pickle
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from multiprocessing.connection import Client, Listener
from typing import Any

# node id -> unix socket address; filled by `launch` before any node process is forked (children inherit it)
_ADDRESSES: dict[int, str] = {}
_local = threading.local()
_stop_event = threading.Event()


class RemoteError(RuntimeError):
    """An exception raised inside a node's method, re-raised at the caller with the remote traceback."""


def _connection(node_id: int) -> Any:
    conns = getattr(_local, "conns", None)
    if conns is None:
        conns = _local.conns = {}
    if node_id not in conns:
        address = _ADDRESSES[node_id]
        deadline = time.monotonic() + 120
        while True:
            try:
                conns[node_id] = Client(address, family="AF_UNIX")
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    return conns[node_id]


def _call(node_id: int, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    conn = _connection(node_id)
    conn.send_bytes(pickle.dumps((method, args, kwargs)))
    status, payload = pickle.loads(conn.recv_bytes())
    if status == "err":
        raise RemoteError(payload)
    return payload


class _Futures:
    _pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="courier-futures")

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id

    def __getattr__(self, method: str) -> Callable[..., concurrent.futures.Future[Any]]:
        def submit(*args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
            return self._pool.submit(_call, self._node_id, method, args, kwargs)

        return submit


class Handle:
    """A courier client of one node: ``handle.method(...)`` blocks, ``handle.futures.method(...)`` returns a future."""

    def __init__(self, node_id: int, label: str = "") -> None:
        self._node_id = node_id
        self._label = label

    def __reduce__(self) -> Any:
        return (Handle, (self._node_id, self._label))

    @property
    def futures(self) -> _Futures:
        return _Futures(self._node_id)

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("__"):
            raise AttributeError(method)
        return lambda *args, **kwargs: _call(self._node_id, method, args, kwargs)

    def __repr__(self) -> str:
        return f"<courier handle {self._label or self._node_id}>"


class CourierNode:
    """A node whose object serves its methods to the other nodes."""

    def __init__(self, cls: type, *args: Any, **kwargs: Any) -> None:
        self.cls, self.args, self.kwargs = cls, args, kwargs


class PyClassNode:
    """A node whose object's ``run()`` is the process's work."""

    def __init__(self, cls: type, *args: Any, **kwargs: Any) -> None:
        self.cls, self.args, self.kwargs = cls, args, kwargs


class Program:
    """A set of labelled nodes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[tuple[str, CourierNode | PyClassNode]] = []

    def add_node(self, node: CourierNode | PyClassNode, label: str = "") -> Handle | None:
        """Add `node`; courier nodes return their handle (launchpad returns none for a PyClassNode)."""
        node_id = len(self.nodes)
        self.nodes.append((label or f"node_{node_id}", node))
        return Handle(node_id, label) if isinstance(node, CourierNode) else None


def stop() -> None:
    """`lp.stop()`: the calling node is done (the launcher tears the program down once every worker exits)."""
    _stop_event.set()


def _install_tracer(prefix: str, calls: set[str]) -> None:
    def tracer(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_filename.startswith(prefix):
                calls.add(f"{frame.f_globals.get('__name__', '?')}:{code.co_qualname}")

    sys.setprofile(tracer)
    threading.setprofile(tracer)


def _node_main(node_id: int, label: str, node: Any, trace_dir: str | None, env: dict[str, str]) -> int:
    os.environ.update(env)
    # a node is a fresh program in launchpad: the caller's warning filters (pytest's "error") do not apply
    warnings.resetwarnings()
    warnings.simplefilter("default")
    calls: set[str] = set()
    if trace_dir:
        import oat

        _install_tracer(os.path.dirname(oat.__file__), calls)
    code = 0
    try:
        args = pickle.loads(pickle.dumps(node.args))  # what crosses a process boundary is a copy, as in courier
        kwargs = pickle.loads(pickle.dumps(node.kwargs))
        obj = node.cls(*args, **kwargs)
        if isinstance(node, CourierNode):
            _serve(obj, _ADDRESSES[node_id])
        else:
            obj.run()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        if trace_dir:
            with open(os.path.join(trace_dir, f"{label}.json"), "w") as fh:
                json.dump(sorted(calls), fh)
    return code


def _serve(obj: Any, address: str) -> None:
    listener = Listener(address, family="AF_UNIX")
    done = threading.Event()

    def handle(conn: Any) -> None:
        with conn:
            while not done.is_set():
                try:
                    method, args, kwargs = pickle.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    return
                if method == "__stop__":
                    halt = getattr(obj, "halt", None)
                    if callable(halt):
                        halt()
                    done.set()
                    conn.send_bytes(pickle.dumps(("ok", None)))
                    return
                try:
                    reply = ("ok", getattr(obj, method)(*args, **kwargs))
                except BaseException as err:
                    reply = ("err", f"{type(err).__name__}: {err}\n{traceback.format_exc()}")
                conn.send_bytes(pickle.dumps(reply))

    def accept() -> None:
        while not done.is_set():
            try:
                conn = listener.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    if callable(getattr(obj, "run", None)):
        threading.Thread(target=obj.run, daemon=True).start()
    done.wait()
    listener.close()


def launch(
    program: Program,
    launch_type: str | None = None,
    local_resources: dict[str, Any] | None = None,
    terminal: str | None = None,
    *,
    trace_dir: str | None = None,
    timeout: float = 900.0,
) -> None:
    """Fork one process per node, wait for every `PyClassNode` to finish, then stop the courier nodes."""
    del launch_type, terminal
    trace_dir = trace_dir or os.environ.get("LP_STANDIN_TRACE_DIR") or None
    resources = local_resources or {}
    sock_dir = tempfile.mkdtemp(prefix="lp-standin-")
    _ADDRESSES.clear()
    for node_id in range(len(program.nodes)):
        _ADDRESSES[node_id] = os.path.join(sock_dir, f"n{node_id}.sock")
    sys.stdout.flush()
    sys.stderr.flush()
    pids: dict[int, tuple[str, bool]] = {}
    groups: list[int] = []
    for node_id, (label, node) in enumerate(program.nodes):
        env = dict(getattr(resources.get(label), "env", {}) or {})
        pid = os.fork()
        if pid == 0:  # the node's process, in its own process group: what it spawns is torn down with it
            code = 1
            try:
                os.setsid()
                code = _node_main(node_id, label, node, trace_dir, env)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        pids[pid] = (label, isinstance(node, PyClassNode))
        groups.append(pid)
    failed: list[str] = []
    workers = {pid for pid, (_, is_worker) in pids.items() if is_worker}
    deadline = time.monotonic() + timeout
    try:
        while workers:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"program {program.name!r} did not finish within {timeout:.0f}s")
                time.sleep(0.1)
                continue
            label, _ = pids.pop(pid)
            workers.discard(pid)
            if os.waitstatus_to_exitcode(status) != 0:
                failed.append(label)
                break
    finally:
        for node_id, (_, node) in enumerate(program.nodes):
            if isinstance(node, CourierNode):
                with contextlib.suppress(Exception):  # a node that already died has nothing to stop
                    _call(node_id, "__stop__", (), {})
        for pid in list(pids):
            for _ in range(100):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
        for pgid in groups:  # e.g. the plasma store a PlasmaShmServer node started: launchpad kills the node's tree
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, 9)
        for conn in getattr(_local, "conns", {}).values():
            conn.close()
        _local.conns = {}
    if failed:
        raise RuntimeError(f"node(s) {failed} of program {program.name!r} exited with an error (see stderr)")
