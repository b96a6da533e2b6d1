"""Matrix products on the cpu's cores: on BLAS's own threads while nothing else runs on
every core, else on this package's pool with NumPy's BLAS held to one thread.

After a product on its own threads, OpenBLAS's workers keep spinning on the cores for
about a tenth of a second, waiting for the next one. A kernel that runs on every core
(gelu over a GPT's activations, attention's parts, a convolution's bands) and runs beside
them took up to twice as long: a GPT step spent half its time so. So while such kernels
run (``split.busy``: one ran within two seconds), every product is a one-thread BLAS call
and the cores are shared out by ``split``'s pool alone, as PyTorch's kernels share one
pool: a product of CUT_MIN multiply-adds or more is cut into one part a core (by rows of
the bigger operand, or by columns, so that no part packs all of the bigger one; or by the
batch; a batch's rows against one matrix first made one product), each taking 1.05-1.15
times as long as BLAS's own threading; smaller ones run whole on the calling thread (cut,
they took longer than whole: waking a thread costs more than half of a 0.2 ms product).
One product on BLAS's threads among them would wake its workers again. A model whose
kernels all run on the calling thread (a small MLP) keeps BLAS's threads: their spinning
slows nothing there, and one thread runs a 0.1-1 ms product 1.6-2 times as slowly.

Cutting a product by rows or columns leaves each element's sum as it was where BLAS blocks
the inner dimension alike in every part, as OpenBLAS's AVX-512 kernels do: the results are
then the bits of the uncut call. OpenBLAS 0.3.31's Haswell (AVX2) kernels sum some elements
of a part in another order, so there a product's last bits depend on how it was cut (as
on BLAS's own threads they depend on their count); the gpu is held to tolerances, not bits.

BLAS's thread count is process-wide: held at one while one of these products (or a kernel
that makes its own on every core, ``one_thread``) runs, and restored after it. Where
threadpoolctl finds no BLAS library to hold, products run on BLAS's threads.
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


def product(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """np.matmul(a, b, out=out) for 2-D or batched 3-D operands (out of the product's
    shape): on BLAS's threads, or, while the pool is ``busy``, with BLAS on one thread and
    cut across the cores where it is big."""
    if a.size == 0 or out.size == 0:         # (nothing to cut; k = 0 gives zeros)
        return np.matmul(a, b, out=out)
    if a.ndim == 3 and b.ndim == 2 and a.strides[0] == a.shape[1] * a.strides[1]:
        # A batch's rows against one matrix (a linear layer over (B, T, E)) are one product:
        # NumPy's batched call makes one per matrix, 128 x 256 by 256 x 1024 each at 130
        # GFLOP/s on two cores where 4096 rows at once ran at 175-250.
        product(a.reshape(-1, a.shape[2]), b, out.reshape(-1, out.shape[2]))
        return out
    if not can_hold() or not split.busy():
        return np.matmul(a, b, out=out)       # (BLAS's threads: nothing else to slow)
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
        ranges = split.even(batch, parts)
    elif a.size >= b.size and m >= parts:      # (each part packs all of the other operand)
        def part(lo, hi):
            np.matmul(a[..., lo:hi, :], b, out=out[..., lo:hi, :])
        ranges = split.even(m, parts)
    elif n >= parts:
        def part(lo, hi):
            np.matmul(a, b[..., lo:hi], out=out[..., lo:hi])
        ranges = split.even(n, parts)
    else:
        ranges = []
    with one_thread():
        if ranges:
            split.run_ranges(part, ranges, busy=False)
        else:
            np.matmul(a, b, out=out)
    return out
