"""The workspace: counters and room for partial results that kernels finishing within
their own dispatch use (split reductions, split-K products, softmax cross-entropy's mean).

Dispatches take successive ranges of it, so independent ones that follow each other share
no range and need no barrier between them; the recorder does not track these ranges (which
spares its hazard check two of a dispatch's four). Where the ranges start again from the
first, a barrier orders each reuse after the last use (a counter is back at zero once the
dispatch that used it has finished). The caller holds the device lock from taking a range
to recording its dispatch, so no other thread's dispatch takes the same range in between.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DeviceOutOfMemory
from .memory import DeviceArray

COUNTERS = 1 << 16               # uint32 counters, zero between dispatches
SCRATCH = 1 << 16                # partial results kept in the workspace, made with it
BIG_SCRATCH = 1 << 21            # ... past that, in a second range made at first need, up to
                                 # half of it a dispatch (8 MiB: two of the H 1024 MLP's
                                 # split products' partial results), else allocated, each its
                                 # own. Reusing this range keeps them in the GPU's L2 cache
                                 # and costs no allocation (docs/performance.md).
COUNTER, PARTIAL, BIG_PARTIAL = 0, 1, 2     # the ranges' arrays


class Workspace:
    def __init__(self, device):
        self.device = device
        self.arrays = None           # (counters, partials), made at first use
        self.big = None              # BIG_SCRATCH's array (False: there was no room for it)
        self.cursors = [0, 0, 0]     # where the next range of each array starts

    def make(self) -> tuple:
        """(counters, partials), made (and the counters zeroed) on first use."""
        if self.arrays is None:
            dev = self.device
            with dev.lock:
                if self.arrays is None:    # (another thread may have made them)
                    pool = dev.persistent_pool
                    counters = DeviceArray(pool.alloc(4 * COUNTERS), (COUNTERS,), np.uint32)
                    partials = DeviceArray(pool.alloc(4 * SCRATCH), (SCRATCH,), np.float32)
                    dev.rec.fill(counters.alloc.block.buffer, counters.alloc.offset,
                                 counters.nbytes, 0, [counters.span])
                    dev.rec.barrier()              # the zeros before any use of them
                    self.arrays = counters, partials
        return self.arrays

    def take(self, which: int, n: int) -> int:
        """The device address of ``n`` elements of the counters (COUNTER), the partial
        results (PARTIAL) or the big partial results (BIG_PARTIAL, made by ``has_big``):
        the next ones in turn, after a barrier where the ranges start again."""
        array = self.big if which == BIG_PARTIAL else (self.arrays or self.make())[which]
        start = self.cursors[which]
        if start + n > array.size:
            start = 0
            self.device.rec.barrier()
        self.cursors[which] = (start + n + 63) // 64 * 64    # 256-byte aligned ranges
        return array.address + 4 * start

    def has_big(self) -> bool:
        """Whether the workspace has its room for BIG_SCRATCH partial results, made here at
        first need; where the device's memory (or its budget) had none, it never has, and
        those partial results are allocated, each its own."""
        if self.big is None:
            try:
                alloc = self.device.persistent_pool.alloc(4 * BIG_SCRATCH)
            except DeviceOutOfMemory:
                self.big = False
            else:
                self.big = DeviceArray(alloc, (BIG_SCRATCH,), np.float32)
        return self.big is not False

    def partials(self, shape, writes) -> tuple:
        """(the address, ``writes`` plus what to name to the recorder) of room for partial
        results read back within their dispatch: the workspace's up to SCRATCH values, or
        half of BIG_SCRATCH, else storage of their own. The caller holds the device lock."""
        used = math.prod(shape)
        if used <= SCRATCH:
            return self.take(PARTIAL, used), writes
        if used <= BIG_SCRATCH // 2 and self.has_big():
            return self.take(BIG_PARTIAL, used), writes
        allocated = self.device.empty(shape)
        return allocated.address, writes + [allocated]

    def forget(self) -> None:
        """Drop the arrays (their pool is being released)."""
        self.arrays = self.big = None
        self.cursors = [0, 0, 0]
