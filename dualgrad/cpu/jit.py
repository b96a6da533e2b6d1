"""How the cpu kernels are compiled: cached on disk, and with NumPy's floating-point error
model, so x / 0 gives inf or NaN (as IEEE arithmetic and the GPU do) instead of raising
ZeroDivisionError.

Kernels run on the calling thread; Numba's own worker threads are not used (beside BLAS's
they oversubscribed the cores, docs/performance.md). Big kernels are cut into slices that
run on every core through ``split.py``'s pool, the one pool this backend runs on (products
too: ``blas.py``); kernels release the GIL for that.

Compiling takes seconds and happens once per install: Numba keeps the machine code in
dualgrad's cache directory (``numba/<sources>/`` under ``DUALGRAD_CACHE_DIR``, beside the
gpu's pipelines; ``NUMBA_CACHE_DIR``, where set, is Numba's own choice and stays). Never
inside the installed package: a reinstall would leave files there that shadow the next
install. ``<sources>`` is a hash of every module the kernels are compiled from: Numba checks
only the file a kernel is defined in, and the kernels inline functions from others
(vmath's formulas, the op codes), so a changed formula would otherwise run as the machine
code of the old one.
Where there is no writable cache directory, kernels are compiled in each process. The first
compilation in a process prints one line on stderr so the pause is not silent.

Several processes may fill one cache at once (data-parallel ranks, parallel test workers):
each kernel's cache index is read and written under a file lock (``_locked_cache``), so two
processes compiling new signatures of one kernel never both take the same data file.
"""
import contextlib
import functools
import hashlib
import os
import pathlib
import sys

import numba
from numba import njit
from numba.core import event

try:
    import fcntl
except ImportError:                # (Windows: no lock; processes then fill a cache in turn)
    fcntl = None

from ..paths import writable_subdirectory


def sources_tag() -> str:
    """A hash of the sources the cpu kernels are compiled from: this package's modules and
    the ones above it they import (the op table, the contract's constants, shapes)."""
    here = pathlib.Path(__file__).resolve().parent
    digest = hashlib.sha256()
    above = [here.parent / name for name in ("kernel_ops.py", "backend.py", "shapes.py")]
    for path in sorted(here.glob("*.py")) + above:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


if not os.environ.get("NUMBA_CACHE_DIR"):
    _where = writable_subdirectory(os.path.join("numba", sources_tag()))
    numba.config.CACHE_DIR = str(_where) if _where is not None else ""
CACHE_DIR = numba.config.CACHE_DIR           # (set before any kernel below is decorated)
CACHING = bool(CACHE_DIR)


@contextlib.contextmanager
def cache_lock(index_path: str):
    """Held while a kernel's cache index (and the data file it names) is read or written:
    an exclusive lock on the file beside the index, shared by every process."""
    try:
        f = open(index_path + ".lock", "a") if fcntl is not None else None
    except OSError:            # (the cache directory gone: Numba's own calls find it so)
        f = None
    if f is None:
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _locked_cache(dispatcher):
    """``dispatcher`` with its cache file's save and load under ``cache_lock``. Numba's save
    reads the index, takes the first data file name no entry has, then writes the index and
    the data: two processes saving new signatures of one kernel at once both took ".1.nbc",
    and the index could pair one's signature with the other's machine code ("can't unbox
    array" in a later run)."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index_path = getattr(cache_file, "_index_path", None)
    if index_path is None:             # (no disk cache, or a Numba that keeps it elsewhere)
        return dispatcher
    for name in ("save", "load"):
        unlocked = getattr(cache_file, name)

        @functools.wraps(unlocked)
        def locked(*args, _unlocked=unlocked, **kwargs):
            with cache_lock(index_path):
                return _unlocked(*args, **kwargs)
        setattr(cache_file, name, locked)
    return dispatcher


def kernel(fn):
    """A compiled kernel, cached on disk across processes."""
    return _locked_cache(njit(cache=CACHING, nogil=True, error_model="numpy")(fn))


def fma_kernel(fn):
    """A kernel in which a multiply and an add may fuse (one rounding instead of two) where
    the CPU has FMA: for the kernels that evaluate vmath's polynomials, whose float32
    results do not change by it."""
    return _locked_cache(njit(cache=CACHING, nogil=True, error_model="numpy",
                              fastmath={"contract"})(fn))


def scalar(fn):
    """A per-element helper, inlined into the kernels that call it."""
    return njit(inline="always", error_model="numpy")(fn)


class _CompileNotice(event.Listener):
    """Prints one line on stderr when this process first compiles one of our kernels (a
    kernel found in Numba's disk cache is loaded, not compiled, and says nothing)."""

    shown = False

    def on_start(self, ev):
        dispatcher = ev.data.get("dispatcher") if isinstance(ev.data, dict) else None
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
        if not self.shown and module.startswith(__package__):
            type(self).shown = True
            print("dualgrad: compiling cpu kernels for first use (a few seconds each "
                  "time a new kernel is needed; cached on disk for later runs)",
                  file=sys.stderr, flush=True)

    def on_end(self, ev):
        pass


event.register("numba:compile", _CompileNotice())
