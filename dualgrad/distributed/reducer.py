"""Gradient buckets and the thread that all-reduces them while the backward pass runs on.

Parameters are packed into buckets of about ``bucket_bytes``, in reverse order of
registration (roughly the order the backward pass finishes their gradients). When every
gradient of a bucket is final (a post-accumulate-grad hook), the bucket is staged out: the
device copies those gradients into the bucket's host buffer and is told to go on. A
thread of the reducer waits for each staged bucket in bucket order, averages it across
the processes and hands it back; at the end of the backward pass the averages are staged
in, into the same gradients.

Each element of the average is summed once, by the process that owns its slice of the
bucket, so every process receives the same bits and the replicas never drift apart:
through an MPI shared-memory window where all processes share a host (each reads every
process's slice in place), else by a reduce-scatter and an all-gather.
"""
from __future__ import annotations

import math
import os
import threading

import numpy as np

from ..api import device
from ..api.residency import handle
from ..cpu import split
from ..cpu.jit import kernel
from ..errors import DistributedError, InvalidValueError


class CollectiveAverager:
    """The mean across the processes of ``array``, by MPI's collectives: a reduce-scatter,
    each process dividing its own slice, then an all-gather (any hosts)."""

    def __init__(self, w, comm, size: int, dtype):
        self.w, self.comm = w, comm
        self.array = _page_aligned(size, dtype)
        self.part = np.empty(size // w.size, dtype)

    def average(self, what: str) -> None:
        w = self.w
        with w.deadline(what):
            self.comm.Reduce_scatter_block(self.array, self.part, w.mpi.SUM)
            np.divide(self.part, w.size, out=self.part)
            self.comm.Allgather(self.part, self.array)

    def close(self) -> None:
        pass


class SharedAverager:
    """The same mean, for processes that share a host, through an MPI shared-memory
    window: each process's ``array`` lies in it, each sums its own slice of all of them
    in rank order (reading each value once) and divides, then copies the others' slices
    of the result. About one memory copy of the array per process, against several for a
    collective through shared-memory messages. Where the host has more cores than
    processes, each process sums and copies on its share of them (one core moves about a
    tenth of what a large host's memory can)."""

    def __init__(self, w, comm, size: int, dtype):
        self.w, self.comm = w, comm
        mpi, dtype = w.mpi, np.dtype(dtype)
        self.window = mpi.Win.Allocate_shared(max(size, 1) * dtype.itemsize, dtype.itemsize,
                                              comm=comm)
        self.window.Lock_all(mpi.MODE_NOCHECK)
        self.views = [np.frombuffer(self.window.Shared_query(r)[0], dtype, size)
                      for r in range(w.size)]
        self.array = self.views[w.rank]
        self.array[:] = 0
        n = size // w.size
        self.slices = [slice(r * n, (r + 1) * n) for r in range(w.size)]
        self.views = tuple(self.views)         # (the kernel takes a tuple of arrays)
        self.threads = max(1, min(split.MAX_PARTS, split.cores() // w.local_size,
                                  n // PART_MIN))

    def _together(self) -> None:
        """Every process's writes so far are seen by all (a barrier between syncs)."""
        self.window.Sync()
        self.comm.Barrier()
        self.window.Sync()

    def average(self, what: str) -> None:
        w, mine = self.w, self.slices[self.w.rank]
        with w.deadline(what):
            self._together()                   # every process's values are in
            # (no other process reads this slice of this array until the next barrier)
            split.run_ranges(lambda lo, hi: _mean_into(self.views, lo, hi,
                                                       self.array[lo:hi]),
                             _cut(mine.start, mine.stop, self.threads))
            self._together()
            split.run_ranges(lambda lo, hi: _copy_range(self.views[self._owner(lo)],
                                                        self.array, lo, hi),
                             [part for r, theirs in enumerate(self.slices) if r != w.rank
                              for part in _cut(theirs.start, theirs.stop, self.threads)])
            self._together()                   # none writes its array while others read

    def _owner(self, at: int) -> int:
        """The process whose slice holds element ``at``."""
        return at // (self.slices[0].stop - self.slices[0].start)

    def close(self) -> None:
        self.views = self.array = None
        self.window.Unlock_all()
        self.window.Free()


MEAN_BLOCK = 4096      # elements a pass of _mean_into keeps in the cache (16 KiB of float32)
PART_MIN = 1 << 18     # elements a thread takes at least (less costs more to hand over)
LINE = 16              # float32 elements a cache line: the threads' ranges start on one


def _cut(start: int, stop: int, parts: int) -> list:
    """[start, stop) in at most ``parts`` ranges, each starting on a cache line (the last
    takes the rest). Each element is summed alone, so the cut changes no bit."""
    step = max(1, -(-(stop - start) // parts // LINE) * LINE)
    return [(lo, min(lo + step, stop)) for lo in range(start, stop, step)] or [(start, stop)]


@kernel
def _mean_into(views, start, stop, out):
    """out[i - start] = (views[0][i] + views[1][i] + ...) / len(views), summed in order,
    for i in [start, stop) (at least two views). A block at a time, one loop per view, so
    that each loop is a vector loop and the block's sums stay in the cache."""
    k = len(views)
    for lo in range(start, stop, MEAN_BLOCK):
        hi = min(lo + MEAN_BLOCK, stop)
        acc, first, second = out[lo - start:hi - start], views[0][lo:hi], views[1][lo:hi]
        for i in range(hi - lo):
            acc[i] = first[i] + second[i]
        for j in range(2, k):
            more = views[j][lo:hi]
            for i in range(hi - lo):
                acc[i] += more[i]
        for i in range(hi - lo):
            acc[i] = acc[i] / k


def _copy_range(src, dst, lo, hi):
    """dst[lo:hi] = src[lo:hi] (NumPy's copy, which lets go of the GIL while it copies)."""
    np.copyto(dst[lo:hi], src[lo:hi])


SHARED_ENV = "DUALGRAD_DIST_SHARED_MEMORY"


def shared_memory_allowed() -> bool:
    """Whether DUALGRAD_DIST_SHARED_MEMORY allows the shared-memory average ("1" or unset:
    yes, where every process is on one host; "0": collectives always)."""
    value = os.environ.get(SHARED_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise InvalidValueError(f"environment variable {SHARED_ENV} is {value!r}; expected "
                                "1 (average through shared memory on one host) or 0 (by "
                                "MPI's collectives)")
    return value != "0"


PAGE = 4096      # a device imports host memory in pages (VK_EXT_external_memory_host)


def _page_aligned(size: int, dtype) -> np.ndarray:
    """Zeros in memory that starts on a page (so a device can import it)."""
    dtype = np.dtype(dtype)
    raw = np.zeros(size * dtype.itemsize + PAGE, np.uint8)
    skip = -raw.ctypes.data % PAGE
    return raw[skip:skip + size * dtype.itemsize].view(dtype)


def averager(w, comm, size: int, dtype):
    """How this world averages ``size`` elements: through shared memory where every
    process is on one host, else by collectives."""
    if w.size > 1 and w.local_size == w.size and shared_memory_allowed():
        return SharedAverager(w, comm, size, dtype)
    return CollectiveAverager(w, comm, size, dtype)


class Bucket:
    """Parameters whose gradients are all-reduced together: their element offsets in one
    host array (padded to a multiple of the world size, each process owning a slice)."""

    def __init__(self, index: int, params: list, w, comm):
        self.index, self.params = index, params
        self.dtype = params[0].dtype
        self.offsets, at = [], 0
        for p in params:
            self.offsets.append(at)
            at += p.size
        # a multiple of the world size (a slice each) and of a page per process (each
        # process's array in a shared window then starts on a page: importable)
        unit = math.lcm(w.size, PAGE // self.dtype.itemsize)
        self.size = -(-max(at, 1) // unit) * unit
        self.averager = averager(w, comm, self.size, self.dtype)
        self.buffer, self.backend = None, None
        self.waiting = len(params)           # gradients not yet final in this pass

    def host_buffer(self, backend):
        """The host buffer on ``backend`` (made anew after a change of backend): the
        averager's array itself where the backend copies into any host memory."""
        if self.backend is not backend:
            if self.buffer is not None:
                self.buffer.close()
            self.buffer = backend.host_buffer(self.size, self.dtype, self.averager.array)
            self.backend = backend
            self.buffer.array[:] = 0
        return self.buffer

    def average(self, what: str) -> None:
        """Average the staged-out values in place (in the host buffer)."""
        staged, array = self.buffer.array, self.averager.array
        if staged is not array:
            array[:] = staged
        self.averager.average(what)
        if staged is not array:
            staged[:] = array

    def pieces(self, backend) -> list:
        return [(handle(backend, p._grad), at) for p, at in zip(self.params, self.offsets)]

    def close(self) -> None:
        if self.buffer is not None:
            self.buffer.close()
            self.buffer = self.backend = None
        self.averager.close()


def plan(params: list, bucket_bytes: int, w, comm) -> list:
    """Buckets over ``params`` in reverse order, each of one dtype and at most
    ``bucket_bytes`` (a larger parameter gets a bucket of its own)."""
    buckets, current, nbytes = [], [], 0
    for p in reversed(params):
        if current and (p.dtype != current[0].dtype or
                        nbytes + p.size * p.dtype.itemsize > bucket_bytes):
            buckets.append(current)
            current, nbytes = [], 0
        current.append(p)
        nbytes += p.size * p.dtype.itemsize
    if current:
        buckets.append(current)
    return [Bucket(i, ps, w, comm) for i, ps in enumerate(buckets)]


class Reducer:
    """Averages the gradients of ``params`` across the world's processes, a bucket at a
    time, overlapping the backward pass (see the module's docstring)."""

    def __init__(self, world, params: list, bucket_bytes: int):
        self.world = world
        self.comm = world.split()
        self.buckets = plan(params, bucket_bytes, world, self.comm)
        self.bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self._cond = threading.Condition()
        self._staged: dict = {}        # bucket index -> landing, for the thread to take
        self._done = 0                 # buckets averaged in this run
        self._error = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="dualgrad-allreduce",
                                        daemon=True)
        self._thread.start()

    # -- the main thread ---------------------------------------------------------------------
    def ready(self, p) -> None:
        """``p``'s gradient for this pass is final: stage its bucket out once complete."""
        bucket = self.bucket_of[id(p)]
        bucket.waiting -= 1
        if bucket.waiting == 0:
            self._stage_out(bucket)

    def _stage_out(self, bucket: Bucket) -> None:
        backend = device.active()
        backend.stage_out(bucket.pieces(backend), bucket.host_buffer(backend),
                          then=lambda landing: self._hand(bucket.index, landing))

    def _hand(self, index: int, landing) -> None:
        """Bucket ``index`` is on its way to the host: the thread's to average."""
        with self._cond:
            self._staged[index] = landing
            self._cond.notify_all()

    def finish(self) -> None:
        """At the end of the backward pass: stage out the buckets still waiting (a
        parameter that got no gradient counts as a zero one), wait for every average and
        stage it in, into the gradients. (In a step being recorded, the waiting happens
        at each run, between the parts of the recording.)"""
        try:
            for bucket in self.buckets:
                if bucket.waiting:
                    for p in bucket.params:
                        if p._grad is None:
                            p.grad = np.zeros(p.shape, p.dtype)
                    bucket.waiting = 0
                    self._stage_out(bucket)
            backend = device.active()
            for k, bucket in enumerate(self.buckets):
                backend.stage_in(bucket.buffer, bucket.pieces(backend),
                                 before=self._collect if k == 0 else None)
                for p in bucket.params:
                    p._grad.written()
        finally:
            for bucket in self.buckets:
                bucket.waiting = len(bucket.params)

    def _collect(self) -> None:
        """Wait until the thread has averaged every bucket of this run."""
        with self._cond:
            finished = self._cond.wait_for(
                lambda: self._done == len(self.buckets) or self._error is not None,
                timeout=self.world.timeout * 2)
            error = self._error
            if finished and error is None:
                self._staged.clear()
                self._done = 0
        if error is not None:
            raise error
        if not finished:
            raise DistributedError(f"rank {self.world.rank}: the gradients' all-reduce "
                                   "did not finish in time")

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=self.world.timeout)
        for bucket in self.buckets:
            bucket.close()
        self.comm.Free()

    # -- the all-reduce thread -----------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._done in self._staged)
                if self._closed:
                    return
                index = self._done
                landing = self._staged.pop(index)
            try:
                self._average(self.buckets[index], landing)
            except BaseException as exc:  # handed to the main thread, which raises it
                with self._cond:
                    self._error = exc
                    self._cond.notify_all()
                return
            with self._cond:
                self._done += 1
                self._cond.notify_all()

    def _average(self, bucket: Bucket, landing) -> None:
        w = self.world
        if not landing.wait(w.timeout):
            raise DistributedError(f"rank {w.rank}: the device did not finish the "
                                   f"gradients of bucket {bucket.index} in time")
        bucket.average(f"the all-reduce of gradient bucket {bucket.index}")
