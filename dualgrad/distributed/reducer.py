"""Gradient buckets and the thread that all-reduces them while the backward pass runs on.

Parameters are packed into buckets of about ``bucket_bytes``, in reverse order of
registration (roughly the order the backward pass finishes their gradients). When every
gradient of a bucket is final (a post-accumulate-grad hook), the bucket is staged out: the
device copies those gradients into the bucket's host buffer and is told to go on. A
thread of the reducer waits for each staged bucket in bucket order, averages it across
the processes and hands it back; at the end of the backward pass the averages are staged
in, into the same gradients.

The average is a reduce-scatter then an all-gather: each element is summed once, by the
process that owns its slice, so every process receives the same bits and the replicas
never drift apart, whatever algorithm the MPI library picks.
"""
from __future__ import annotations

import threading

import numpy as np

from ..api import device
from ..api.residency import handle
from ..errors import DistributedError


class Bucket:
    """Parameters whose gradients are all-reduced together: their element offsets in one
    host buffer (padded to a multiple of the world size, each process owning a slice)."""

    def __init__(self, index: int, params: list, world_size: int):
        self.index, self.params = index, params
        self.dtype = params[0].dtype
        self.offsets, at = [], 0
        for p in params:
            self.offsets.append(at)
            at += p.size
        self.used = at
        self.size = -(-max(at, 1) // world_size) * world_size
        self.slice = np.empty(self.size // world_size, self.dtype)
        self.buffer, self.backend = None, None
        self.waiting = len(params)           # gradients not yet final in this pass

    def host_buffer(self, backend):
        """The host buffer on ``backend`` (made anew after a change of backend)."""
        if self.backend is not backend:
            if self.buffer is not None:
                self.buffer.close()
            self.buffer, self.backend = backend.host_buffer(self.size, self.dtype), backend
            self.buffer.array[self.used:] = 0
        return self.buffer

    def pieces(self, backend) -> list:
        return [(handle(backend, p._grad), at) for p, at in zip(self.params, self.offsets)]

    def close(self) -> None:
        if self.buffer is not None:
            self.buffer.close()
            self.buffer = self.backend = None


def plan(params: list, bucket_bytes: int, world_size: int) -> list:
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
    return [Bucket(i, ps, world_size) for i, ps in enumerate(buckets)]


class Reducer:
    """Averages the gradients of ``params`` across the world's processes, a bucket at a
    time, overlapping the backward pass (see the module's docstring)."""

    def __init__(self, world, params: list, bucket_bytes: int):
        self.world = world
        self.comm = world.split()
        self.buckets = plan(params, bucket_bytes, world.size)
        self.bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self._cond = threading.Condition()
        self._staged: dict = {}        # bucket index -> landing, for the thread to take
        self._done = 0                 # buckets averaged in this pass
        self._launched = 0
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
        landing = backend.stage_out(bucket.pieces(backend), bucket.host_buffer(backend))
        with self._cond:
            self._staged[bucket.index] = landing
            self._launched += 1
            self._cond.notify_all()

    def finish(self) -> None:
        """At the end of the backward pass: stage out the buckets still waiting (a
        parameter that got no gradient counts as a zero one), wait for every average and
        stage it in, into the gradients."""
        try:
            for bucket in self.buckets:
                if bucket.waiting:
                    for p in bucket.params:
                        if p._grad is None:
                            p.grad = np.zeros(p.shape, p.dtype)
                    bucket.waiting = 0
                    self._stage_out(bucket)
            with self._cond:
                finished = self._cond.wait_for(
                    lambda: self._done == len(self.buckets) or self._error is not None,
                    timeout=self.world.timeout * 2)
                error = self._error
            if error is not None:
                raise error
            if not finished:
                raise DistributedError(f"rank {self.world.rank}: the gradients' all-reduce "
                                       "did not finish in time")
            backend = device.active()
            for bucket in self.buckets:
                backend.stage_in(bucket.buffer, bucket.pieces(backend))
                for p in bucket.params:
                    p._grad.written()
        finally:
            self._reset()

    def _reset(self) -> None:
        with self._cond:
            self._staged.clear()
            self._done = self._launched = 0
            for bucket in self.buckets:
                bucket.waiting = len(bucket.params)

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
        what = f"the all-reduce of gradient bucket {bucket.index}"
        if not landing.wait(w.timeout):
            raise DistributedError(f"rank {w.rank}: the device did not finish the "
                                   f"gradients of bucket {bucket.index} in time")
        average(w, self.comm, bucket.buffer.array, bucket.slice, what)


def average(w, comm, array: np.ndarray, part: np.ndarray, what: str) -> None:
    """Replace ``array`` (a multiple of the world size long) by its mean across the
    processes, identical in all: a reduce-scatter into ``part`` (1/size of it), each
    process dividing its own slice, then an all-gather."""
    with w.deadline(what):
        comm.Reduce_scatter_block(array, part, w.mpi.SUM)
        np.divide(part, w.size, out=part)
        comm.Allgather(part, array)
