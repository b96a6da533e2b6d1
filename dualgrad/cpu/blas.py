"""Matrix products on the cpu's cores: NumPy's BLAS held to one thread for this package's
calls, big products cut across this package's own threads.

Why: after a product on its own threads, OpenBLAS's workers keep spinning on the cores for
about a tenth of a second, waiting for the next one. The kernels between the products
(gelu, the attention's softmax, layer norms, a convolution's windows) run on those same
cores and took up to twice as long beside them: a GPT step spent half its time so, and one
product on BLAS's threads among held ones slowed those as much. So every product here is
a one-thread BLAS call, and the cores are shared out by ``split``'s pool alone, as
PyTorch's kernels share one pool: products of CUT_MIN multiply-adds or more are cut into
one part a core (by rows of the bigger operand, or by columns, so that no part packs all
of the bigger one; or by the batch), each taking 1.05-1.15 times as long as BLAS's own
threading; smaller ones run whole on the calling thread (cut, they took longer than so),
up to 1.7 times as long as on BLAS's threads, where the kernels around them cut their own
work (a convolution's bands of images, the attention's batch).

Cutting a product by rows or columns leaves each element's sum as it was (BLAS blocks the
inner dimension alike in every part), so the results are the bits of the uncut call.

BLAS's thread count is process-wide: held at one while one of these products (or a kernel
that makes its own on every core, ``one_thread``) runs, and restored after it. Where
threadpoolctl finds no BLAS library to hold, products run whole on BLAS's threads.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from . import split

CUT_MIN = 1 << 25                # multiply-adds of a product cut across the cores

_controllers: list | None = None
_lock = threading.Lock()
_depth = 0
_saved: list = []


def _blas_libraries() -> list:
    """threadpoolctl's controllers of the BLAS libraries loaded (NumPy's), found once."""
    global _controllers
    if _controllers is None:
        try:
            from threadpoolctl import ThreadpoolController
            _controllers = list(ThreadpoolController().select(user_api="blas")
                                .lib_controllers)
        except Exception:        # (not installed, or a library it cannot read: no hold)
            _controllers = []
    return _controllers


def can_hold() -> bool:
    """Whether BLAS's threads can be held to one (threadpoolctl found its library)."""
    return bool(_blas_libraries())


@contextlib.contextmanager
def one_thread():
    """BLAS on one thread inside (nested and concurrent holds are counted; the outermost
    restores each library's count on leaving)."""
    global _depth, _saved
    libraries = _blas_libraries()
    with _lock:
        _depth += 1
        if _depth == 1:
            _saved = [(lib, lib.num_threads) for lib in libraries]
            for lib, _ in _saved:
                lib.set_num_threads(1)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for lib, count in _saved:
                    lib.set_num_threads(count)
                _saved = []


def _parts(count: int, parts: int) -> list:
    return [(count * k // parts, count * (k + 1) // parts) for k in range(parts)]


def product(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """np.matmul(a, b, out=out) for 2-D or batched 3-D operands (out of the product's
    shape), with BLAS on one thread; cut across the cores where it is big."""
    if not can_hold():
        return np.matmul(a, b, out=out)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = out.size // max(1, m * n)
    parts = min(split.cores(), split.MAX_PARTS)
    if batch * m * n * k < CUT_MIN or parts < 2:
        ranges = []
    elif out.ndim == 3 and batch >= parts:
        def part(lo, hi):
            np.matmul(a[lo:hi] if a.ndim == 3 else a, b[lo:hi] if b.ndim == 3 else b,
                      out=out[lo:hi])
        ranges = _parts(batch, parts)
    elif a.size >= b.size and m >= parts:      # (each part packs all of the other operand)
        def part(lo, hi):
            np.matmul(a[..., lo:hi, :], b, out=out[..., lo:hi, :])
        ranges = _parts(m, parts)
    elif n >= parts:
        def part(lo, hi):
            np.matmul(a, b[..., lo:hi], out=out[..., lo:hi])
        ranges = _parts(n, parts)
    else:
        ranges = []
    with one_thread():
        if ranges:
            split.run_ranges(part, ranges)
        else:
            np.matmul(a, b, out=out)
    return out
