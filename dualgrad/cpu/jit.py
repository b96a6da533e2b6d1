"""How the cpu kernels are compiled: cached on disk, and with NumPy's floating-point error
model, so x / 0 gives inf or NaN (as IEEE arithmetic and the GPU do) instead of raising
ZeroDivisionError.

A kernel over many independent elements may come in two builds of one source
(``threadable``): a serial one for small arrays, where starting threads would cost more than
the work, and a threaded one whose ``prange`` loops are split across the cores. Each element
is computed the same way in both, so they give the same bits.

Compiling takes seconds and happens once per install (Numba caches the machine code on
disk); the first compilation in a process prints one line on stderr so the pause is not
silent.
"""
import sys
import types

from numba import njit
from numba.core import event

# Below this many elements a kernel runs serially. Waking the worker threads costs about as
# much as adding tens of thousands of numbers, and threads that wait on each other lose
# badly when another process holds a core (BLAS runs its own threads between our kernels).
PARALLEL_MIN = 1 << 18


def kernel(fn):
    """A compiled kernel, cached on disk across processes."""
    return njit(cache=True, error_model="numpy")(fn)


def scalar(fn):
    """A per-element helper, inlined into the kernels that call it."""
    return njit(inline="always", error_model="numpy")(fn)


def threadable(fn) -> tuple:
    """(serial, threaded) builds of a kernel whose element loops use ``numba.prange``."""
    # Numba's cache is keyed by the function's qualified name and bytecode, not by the
    # parallel flag: the threaded build gets a name of its own so the two never collide.
    threaded = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                                  fn.__closure__)
    threaded.__qualname__ = fn.__qualname__ + "_threaded"
    return kernel(fn), njit(cache=True, error_model="numpy", parallel=True)(threaded)


def pick(builds: tuple, size: int):
    """The build of a ``threadable`` kernel worth running over ``size`` elements."""
    return builds[size >= PARALLEL_MIN]


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
