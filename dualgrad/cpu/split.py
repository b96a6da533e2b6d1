"""Big kernels on every core: the arrays cut into a few slices per core (PIECES), each run by
the same compiled kernel (which releases the GIL); the calling thread and the pool's take
the slices in turn, so a thread whose core is shared (by another process, or slowed by
its memory) does fewer. (One fixed slice a core waited on the slowest: the GPT and CNN
steps took 3-4% longer so.) This pool is the only one the backend runs on: big products
are cut across it too, with BLAS held to one thread (``blas.py``).

Only kernels whose parts are computed alone are split (flat elementwise ones, and the
images of a batch), so the results are the same bits however the arrays are cut. Below
SPLIT_MIN elements, handing a slice to another thread (tens of microseconds, and turns at
the interpreter's lock) costs more than it saves; the activations of a small model's step
stay on the calling thread.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

SPLIT_MIN = 1 << 20               # elements
MAX_PARTS = 8
PIECES = 4                        # ranges a core's part is cut into, taken in turn
BUSY_SECONDS = 2.0                # how long after a kernel on every core ``busy`` says so

_pool: ThreadPoolExecutor | None = None
_pool_pid = 0                     # a forked child has the pool but not its threads
_pool_lock = threading.Lock()
_inside = threading.local()       # .part: this thread is running a part of run_ranges
_last_on_every_core = -float("inf")


def busy() -> bool:
    """Whether a kernel ran on every core within BUSY_SECONDS (products' own cuts aside):
    the work is big enough for the cores to be shared out by this pool alone (blas.py)."""
    return time.monotonic() - _last_on_every_core < BUSY_SECONDS


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


def run(kernel, arrays, *scalars, work: int | None = None, busy: bool = True) -> None:
    """kernel(*slices of ``arrays``, *scalars) over every part of ``arrays`` cut along their
    first axis, which they share (flat arrays: elements; images: the batch); one call when
    they are small (``work`` elements, by default the first array's), the axis short, or
    there is one core. ``busy``: as run_ranges'."""
    ranges = cuts(arrays[0].shape[0], arrays[0].size if work is None else work)
    if len(ranges) < 2:
        kernel(*arrays, *scalars)
        return
    run_ranges(lambda lo, hi: kernel(*(a[lo:hi] for a in arrays), *scalars), ranges,
               busy=busy)


def cuts(count: int, work: int) -> list:
    """range(count) as [(lo, hi), ...]: PIECES a core (MAX_PARTS cores at most) where
    ``work`` elements are worth it (SPLIT_MIN or more), else one."""
    parts = min(cores(), MAX_PARTS, count, work // (SPLIT_MIN // 2) or 1)
    if work < SPLIT_MIN or parts < 2:
        return [(0, count)]
    return even(count, min(count, parts * PIECES))


def even(count: int, parts: int) -> list:
    """range(count) as ``parts`` consecutive ranges [(lo, hi), ...] of near-equal length."""
    return [(count * k // parts, count * (k + 1) // parts) for k in range(parts)]


def run_ranges(fn, ranges, busy: bool = True) -> None:
    """fn(lo, hi) once for each (lo, hi) of ``ranges``: the calling thread and the pool's
    take them in turn, each the next one left when it is done, so a thread whose core is
    shared does fewer (``fn`` releases the GIL: a compiled kernel, a BLAS call). Called
    inside a part, it runs that part's ranges on the part's own thread. ``busy=False``:
    work that does not make the pool ``busy`` (a matrix product's own parts; an
    optimizer's update, which follows the step's products)."""
    global _last_on_every_core
    ranges = list(ranges)
    if len(ranges) < 2 or getattr(_inside, "part", False):
        # (a part that cuts its own work runs it itself: the pool's threads are taken, and
        # waiting on them from one of them would never end)
        for lo, hi in ranges:
            fn(lo, hi)
        return
    if busy:
        _last_on_every_core = time.monotonic()
    left, lock = iter(ranges), threading.Lock()

    def take():
        _inside.part = True
        try:
            while True:
                with lock:
                    item = next(left, None)
                if item is None:
                    return
                fn(*item)
        finally:
            _inside.part = False
    helpers = min(cores(), MAX_PARTS, len(ranges)) - 1
    pool = _workers(helpers + 1)
    pending = [pool.submit(take) for _ in range(helpers)]
    try:
        take()
    finally:
        for job in pending:
            job.result()
