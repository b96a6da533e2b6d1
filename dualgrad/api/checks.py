"""Argument checks shared by the public functions: each raises our error type, naming the
function, the argument, the value and what was expected."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentTypeError, bad_type, bad_value


def is_number(value) -> bool:
    """A real number (Python or NumPy), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and \
        not isinstance(value, (bool, np.bool_))


def integer(fn: str, name: str, value, minimum: int | None = None,
            below: int | None = None) -> int:
    """An int (not a bool) in [minimum, below)."""
    wanted = "an integer" + (f" >= {minimum}" if minimum is not None else "") + \
        (f" below {below}" if below is not None else "")
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise bad_type(fn, name, value, wanted)
    if (minimum is not None and value < minimum) or (below is not None and value >= below):
        raise bad_value(fn, name, value, wanted)
    return int(value)


def number(fn: str, name: str, value, lo: float = -math.inf, hi: float = math.inf,
           lo_open: bool = False, hi_open: bool = False) -> float:
    """A finite number in the interval from lo to hi (each end open or closed)."""
    if not is_number(value):
        raise bad_type(fn, name, value, "a finite number")
    if not math.isfinite(value):
        raise bad_value(fn, name, value, "a finite number")
    inside = (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not inside:
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        raise bad_value(fn, name, value, f"a number in {left}{lo}, {hi}{right}")
    return float(value)


INT32_RANGE = "[-2147483648, 2147483647]"


def int32_value(fn: str, name: str, value) -> int:
    """A number as an int32 tensor holds it: truncated toward 0, as PyTorch converts; one
    outside int32's range, or not finite, is refused (PyTorch refuses it in its fills and
    wraps it in its arithmetic; both backends here refuse it alike)."""
    try:
        result = int(value)
    except (ValueError, OverflowError):
        raise bad_value(fn, name, value, "a finite number") from None
    if not -2 ** 31 <= result < 2 ** 31:
        raise bad_value(fn, name, value, f"a number an int32 tensor can hold, in {INT32_RANGE}")
    return result


def flag(fn: str, name: str, value) -> bool:
    """True or False (NumPy's bool too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise bad_type(fn, name, value, "True or False")
    return bool(value)


def array(fn: str, name: str, value, kinds: str, wanted: str) -> np.ndarray:
    """``value`` as a NumPy array whose dtype kind is one of ``kinds`` (NumPy's codes:
    "b" bool, "i" "u" integers, "f" floats); ``wanted`` says what that means."""
    try:
        result = np.asarray(value)
    except (ValueError, TypeError):
        raise bad_type(fn, name, value, f"an array of {wanted}") from None
    if result.dtype.kind not in kinds:
        raise ArgumentTypeError(f"{fn}: argument '{name}' has dtype {result.dtype}; expected "
                                f"{wanted}")
    return result
