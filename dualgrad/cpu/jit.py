"""How the cpu kernels are compiled: cached on disk, and with NumPy's floating-point error
model, so x / 0 gives inf or NaN (as IEEE arithmetic and the GPU do) instead of raising
ZeroDivisionError."""
from numba import njit


def kernel(fn):
    """A compiled kernel, cached on disk across processes."""
    return njit(cache=True, error_model="numpy")(fn)


def scalar(fn):
    """A per-element helper, inlined into the kernels that call it."""
    return njit(inline="always", error_model="numpy")(fn)
