"""The MPI world a data-parallel run spans: ``init()``, each process's rank and device, and
collectives under a deadline.

The collectives block inside MPI (which makes progress there at full speed, the
interpreter's lock released); a watchdog thread ends the run when one outlives the world's
``timeout``, saying which rank gave up on what. An exception that nothing catches, in any
thread of any process, ends the whole run too (``MPI_Abort``) after printing which rank
failed and why: the other processes stop at once instead of waiting in a collective for a
process that is gone.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import pickle
import shutil
import sys
import threading
import time
import traceback

import numpy as np

from ..api import checks, device
from ..errors import (DeviceUnavailable, DistributedError, DistributedMismatch,
                      DistributedTimeout, bad_type, bad_value)

INSTALL_HINT = ("dualgrad.distributed needs mpi4py and an MPI library: pip install "
                "'dualgrad[distributed]' (mpi4py and MPICH as wheels), then start the "
                "processes with 'mpiexec -n N python script.py'")
WATCH_SECONDS = 0.25              # how often the watchdog looks at the deadlines
ABORT_GRACE_SECONDS = 0.5         # between a failed process's message and its abort


class World:
    """The processes of a run: ``rank`` and ``size`` in the world, ``local_rank`` and
    ``local_size`` among those on the same host, ``device`` this process's backend name,
    ``timeout`` the seconds a collective may take."""

    def __init__(self, mpi, comm, local, timeout: float, device_name: str):
        self.mpi, self.comm, self.timeout = mpi, comm, timeout
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        self.device = device_name
        self._deadlines: dict = {}
        self._watch = threading.Condition()
        self._watchdog = None

    @contextlib.contextmanager
    def deadline(self, what: str):
        """The block (a collective) must end within ``timeout`` seconds, else the run
        ends with a ``DistributedTimeout`` naming ``what``."""
        token = object()
        with self._watch:
            self._deadlines[token] = (time.monotonic() + self.timeout, what)
            if self._watchdog is None:
                self._watchdog = threading.Thread(target=self._watch_deadlines, daemon=True,
                                                  name="dualgrad-watchdog")
                self._watchdog.start()
        try:
            yield
        finally:
            with self._watch:
                del self._deadlines[token]

    def _watch_deadlines(self) -> None:
        while True:
            with self._watch:
                self._watch.wait(WATCH_SECONDS)
                now = time.monotonic()
                late = [what for end, what in self._deadlines.values() if end < now]
            if late:
                exc = DistributedTimeout(
                    f"rank {self.rank}: {late[0]} did not complete within {self.timeout:g} "
                    "s: another process has stopped, failed or is stuck (init(timeout=...) "
                    "sets the limit)")
                end_run(self, type(exc), exc, None, "watchdog")

    def split(self):
        """A communicator of its own over the same processes (a thread that runs
        collectives beside the main thread's needs one: collectives on one communicator
        must come in the same order everywhere)."""
        return self.comm.Dup()


def end_run(w: World, kind, exc, tb, where: str) -> None:
    """Print why this process fails, then end every process of the run."""
    text = "".join(traceback.format_exception(kind, exc, tb)) if tb is not None else ""
    sys.stderr.write(f"{text}dualgrad.distributed: rank {w.rank} of {w.size} failed "
                     f"({where}: {kind.__name__}: {exc}); ending the run\n")
    sys.stderr.flush()
    # The launcher forwards each process's output through a pipe it stops reading once
    # an abort tears the run down: give it a moment to carry the message first.
    time.sleep(ABORT_GRACE_SECONDS)
    w.mpi.COMM_WORLD.Abort(1)


_world: World | None = None
_lock = threading.Lock()


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DistributedError(INSTALL_HINT) from exc
    return MPI


def init(device_kind: str = "auto", world_size: int | None = None,
         timeout: float = 300.0) -> World:
    """Join the run's MPI world and select this process's backend.

    ``device_kind``: ``"auto"`` takes the gpu where the host has a Vulkan device (``gpu:<i>``
    with ``i`` the local rank modulo the devices found, so each process of a host with
    several GPUs has its own), else the cpu backend; ``"gpu"`` requires one; ``"cpu"``
    always takes the cpu. Every process must end up on the same kind of backend (their
    optimizer steps must agree bit for bit). ``world_size``: the number of processes the
    run expects; a different one raises ``DistributedMismatch`` in every process.
    ``timeout``: seconds any collective may take; past them the run ends with a
    ``DistributedTimeout`` naming the rank and the collective.

    From here on an exception that nothing catches ends every process of the run (see the
    module's docstring). Returns the ``World``; ``rank()``, ``world_size()`` and the other
    functions of this module read it."""
    global _world
    fn = "init"
    if device_kind not in ("auto", "cpu", "gpu"):
        raise bad_value(fn, "device_kind", device_kind, "'auto', 'cpu' or 'gpu'")
    if world_size is not None:
        world_size = checks.integer(fn, "world_size", world_size, 1)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise bad_type(fn, "timeout", timeout, "a number of seconds")
    if not timeout > 0:
        raise bad_value(fn, "timeout", timeout, "a positive number of seconds")
    with _lock:
        if _world is not None:
            raise DistributedError("init: this process has already joined the world")
        mpi = _mpi()
        comm = mpi.COMM_WORLD.Dup()
        local = comm.Split_type(mpi.COMM_TYPE_SHARED, key=comm.Get_rank())
        launched = _launched_size()
        if launched > 1 and comm.Get_size() != launched:
            raise DistributedError(
                f"init: mpiexec started {launched} processes but this one sees a world of "
                f"{comm.Get_size()}: mpi4py loaded another MPI library than the one of the "
                f"mpiexec that started it ({mpi.Get_library_version().splitlines()[0]}); "
                "start the run with that library's mpiexec, or point MPI4PY_LIBMPI at the "
                "launcher's libmpi")
        if world_size is not None and world_size != comm.Get_size():
            raise DistributedMismatch(
                f"init: the run has {comm.Get_size()} processes but world_size={world_size} "
                f"was asked for (start it with mpiexec -n {world_size})")
        world = World(mpi, comm, local, float(timeout), "cpu")
        chosen, failure = _choose_device(device_kind, local.Get_rank())
        _agree_on_device(world, chosen, failure)
        world.device = chosen
        _install_fault_handlers(world)
        _world = world
        return world


def _launched_size() -> int:
    """The number of processes the launcher says it started (MPICH's and Open MPI's
    variables), or 0 where it says nothing."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def _choose_device(kind: str, local_rank: int) -> tuple:
    """(backend name, why it failed or ''): the backend selected for this process."""
    try:
        found = [] if kind == "cpu" else device.devices()
        if kind == "gpu" and not found:
            raise DeviceUnavailable(f"init: device_kind='gpu' but this host has no Vulkan "
                                    f"device ({device.gpu_status()[1] or 'none found'})")
        name = f"gpu:{found[local_rank % len(found)]['index']}" if found else "cpu"
        device.ag_device(name)
        return name, ""
    except Exception as exc:                  # told to every process before anyone raises
        return "?", f"{type(exc).__name__}: {exc}"


def _agree_on_device(world: World, chosen: str, failure: str) -> None:
    """Raise in every process where one failed to select its backend or where the
    processes ended up on different kinds of backend."""
    every = all_gather_object((chosen, failure), world)
    for r, (name, why) in enumerate(every):
        if why:
            raise DistributedError(f"init: rank {r} could not select its backend: {why}")
    kinds = {name.partition(":")[0] for name, _ in every}
    if len(kinds) > 1:
        listing = ", ".join(f"rank {r}: {name}" for r, (name, _) in enumerate(every))
        raise DistributedMismatch(
            f"init: the processes are on different backends ({listing}); pass "
            "device_kind='cpu' or give every host a GPU")


def _install_fault_handlers(w: World) -> None:
    def process_hook(kind, exc, tb):
        if issubclass(kind, KeyboardInterrupt):
            return sys.__excepthook__(kind, exc, tb)
        end_run(w, kind, exc, tb, "main thread")

    def thread_hook(args):
        if args.exc_type is SystemExit:
            return
        end_run(w, args.exc_type, args.exc_value, args.exc_traceback,
                f"thread {args.thread.name if args.thread else '?'}")

    sys.excepthook = process_hook
    threading.excepthook = thread_hook


def mpi_launcher() -> str | None:
    """The ``mpiexec`` to start a run with: the one beside this interpreter (where the
    mpich wheel installs it), else the first on the PATH; None where there is none."""
    here = pathlib.Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def world() -> World:
    """The world joined by ``init()`` (raises ``DistributedError`` before it)."""
    if _world is None:
        raise DistributedError("dualgrad.distributed: call dg.distributed.init() first "
                               "(in every process of the run)")
    return _world


def is_initialized() -> bool:
    return _world is not None


def rank() -> int:
    """This process's rank in the world (0 to world_size() - 1)."""
    return world().rank


def world_size() -> int:
    """The number of processes in the run."""
    return world().size


def local_rank() -> int:
    """This process's rank among the processes on its host."""
    return world().local_rank


def is_main() -> bool:
    """Whether this is rank 0 (the process that writes checkpoints and prints)."""
    return world().rank == 0


def barrier() -> None:
    """Wait until every process has called ``barrier()``."""
    w = world()
    with w.deadline("barrier()"):
        w.comm.Barrier()


_OPS = ("sum", "mean", "max", "min")


def all_reduce(value, op: str = "sum"):
    """``value`` (a number, a NumPy array or a Tensor) combined across the processes by
    ``op``: ``"sum"``, ``"mean"``, ``"max"`` or ``"min"``; every process gets the same
    result, of the type it passed (a Tensor comes back on the active backend). A metric
    averaged across ranks: ``all_reduce(loss.item(), "mean")``."""
    from ..api.tensor import Tensor, ag_tensor
    fn = "all_reduce"
    if op not in _OPS:
        raise bad_value(fn, "op", op, "'sum', 'mean', 'max' or 'min'")
    w = world()
    if isinstance(value, Tensor):
        array = value.numpy()
    elif isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.ndarray, np.number)):
        raise bad_type(fn, "value", value, "a number, a NumPy array or a Tensor")
    else:
        array = np.asarray(value)
    if array.dtype.kind not in "fiu":
        raise bad_type(fn, "value", value, "numbers (float or integer)")
    send = np.ascontiguousarray(array, dtype=np.float64 if op == "mean" else array.dtype)
    out = np.empty_like(send)
    mpi_op = {"sum": w.mpi.SUM, "mean": w.mpi.SUM, "max": w.mpi.MAX, "min": w.mpi.MIN}[op]
    with w.deadline(f"all_reduce(op={op!r})"):
        w.comm.Allreduce(send, out, mpi_op)
    if op == "mean":
        out = (out / w.size).astype(array.dtype if array.dtype.kind == "f" else np.float64)
    if isinstance(value, Tensor):
        return ag_tensor(out)
    if isinstance(value, np.ndarray):
        return out
    return out.item()


def _bytes_of(obj) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)


def broadcast_object(obj, root: int = 0, w: World | None = None):
    """``obj`` of rank ``root`` (pickled), in every process."""
    w = w or world()
    if not 0 <= root < w.size:
        raise bad_value("broadcast_object", "root", root, f"a rank in [0, {w.size})")
    data = _bytes_of(obj) if w.rank == root else None
    size = np.array([0 if data is None else data.size], np.int64)
    with w.deadline(f"a broadcast from rank {root}"):
        w.comm.Bcast(size, root)
        if data is None:
            data = np.empty(int(size[0]), np.uint8)
        w.comm.Bcast(data, root)
    return obj if w.rank == root else pickle.loads(data.tobytes())


def all_gather_object(obj, w: World | None = None) -> list:
    """Every process's ``obj`` (pickled), in rank order, in every process."""
    w = w or world()
    data = _bytes_of(obj)
    sizes = np.empty(w.size, np.int64)
    with w.deadline("an all-gather"):
        w.comm.Allgather(np.array([data.size], np.int64), sizes)
        out = np.empty(int(sizes.sum()), np.uint8)
        w.comm.Allgatherv(data, [out, sizes])
    ends = np.cumsum(sizes)
    return [pickle.loads(out[e - s:e].tobytes()) for s, e in zip(sizes, ends)]
