"""Big kernels on every core: the arrays cut into a few slices per core (PIECES), each run by
the same compiled kernel (which releases the GIL); the calling thread and the pool's take
the slices in turn, so a thread whose core is shared does fewer. (One fixed slice a core
waited on the slowest: after a product, BLAS's workers spin on the cores for a while, and
the GPT and CNN steps took 3-4% longer so.)

Only kernels whose parts are computed alone are split (flat elementwise ones, and the
images of a batch), so the results are the same bits however the arrays are cut. Below
SPLIT_MIN elements, handing a slice to another thread (tens of microseconds) costs more
than it saves; the activations of a small model's step stay on the calling thread, out of
the way of BLAS's threads (see jit.py).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

SPLIT_MIN = 1 << 20               # elements
MAX_PARTS = 8
PIECES = 4                        # ranges a core's part is cut into, taken in turn

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0                     # a forked child has the pool but not its threads
_pool_lock = threading.Lock()


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:        # not on Linux
        return os.cpu_count() or 1


def _workers(parts: int) -> ThreadPoolExecutor:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool = ThreadPoolExecutor(max_workers=max(1, cores() - 1),
                                       thread_name_prefix="dualgrad-cpu")
            _pool_pid = os.getpid()
        return _pool


def run(kernel, arrays, *scalars, work: int | None = None) -> None:
    """kernel(*slices of ``arrays``, *scalars) over every part of ``arrays`` cut along their
    first axis, which they share (flat arrays: elements; images: the batch); one call when
    they are small (``work`` elements, by default the first array's), the axis short, or
    there is one core."""
    ranges = cuts(arrays[0].shape[0], arrays[0].size if work is None else work)
    if len(ranges) < 2:
        kernel(*arrays, *scalars)
        return
    run_ranges(lambda lo, hi: kernel(*(a[lo:hi] for a in arrays), *scalars), ranges)


def cuts(count: int, work: int) -> list:
    """range(count) as [(lo, hi), ...]: PIECES a core (MAX_PARTS cores at most) where
    ``work`` elements are worth it (SPLIT_MIN or more), else one."""
    parts = min(cores(), MAX_PARTS, count, work // (SPLIT_MIN // 2) or 1)
    if work < SPLIT_MIN or parts < 2:
        return [(0, count)]
    parts = min(count, parts * PIECES)
    return [(count * k // parts, count * (k + 1) // parts) for k in range(parts)]


def run_ranges(fn, ranges) -> None:
    """fn(lo, hi) once for each (lo, hi) of ``ranges``: the calling thread and the pool's
    take them in turn, each the next one left when it is done, so a thread whose core is
    shared (with BLAS's spinning workers after a product, or another process) does fewer
    (``fn`` releases the GIL: a compiled kernel)."""
    ranges = list(ranges)
    if len(ranges) < 2:
        for lo, hi in ranges:
            fn(lo, hi)
        return
    left, lock = iter(ranges), threading.Lock()

    def take():
        while True:
            with lock:
                item = next(left, None)
            if item is None:
                return
            fn(*item)
    helpers = min(cores(), MAX_PARTS, len(ranges)) - 1
    pool = _workers(helpers + 1)
    pending = [pool.submit(take) for _ in range(helpers)]
    try:
        take()
    finally:
        for job in pending:
            job.result()
