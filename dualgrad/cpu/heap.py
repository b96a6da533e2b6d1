"""The process's heap, set once for a training loop: freed arrays' memory kept for the next
step's arrays instead of handed back to the system.

A training step allocates and frees the same arrays every step (activations, gradients,
a kernel's scratch). glibc's malloc hands big blocks back to the system when they are
freed (an mmap per block of 128 KiB or more at first, and the heap's free top trimmed
past a threshold), so the next step's arrays of the same size fault their pages in again:
18,000 page faults a GPT benchmark step on the 2-core machine, 190 ms of system time in a
step of 850 (PyTorch's: 9,000 and 17 ms). With blocks of up to 32 MiB taken from the heap
and up to 256 MiB of freed heap kept, the step made one fault and took 690-760 ms.

This is glibc's process-wide setting (``mallopt``), made when the cpu backend is first
used. It is left alone where the environment already tunes malloc (MALLOC_MMAP_THRESHOLD_,
MALLOC_TRIM_THRESHOLD_, or glibc.malloc in GLIBC_TUNABLES), under DUALGRAD_CPU_KEEP_MEMORY=0,
and on systems whose C library has no mallopt.
"""
from __future__ import annotations

import ctypes
import os
import threading

from ..errors import InvalidValueError

M_TRIM_THRESHOLD = -1            # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20        # (glibc's largest: half its arenas' heap size)
TRIM_THRESHOLD = 256 << 20

KEEP_ENV = "DUALGRAD_CPU_KEEP_MEMORY"
_lock = threading.Lock()
_state: str | None = None


def keep_freed_memory() -> str:
    """Sets the heap as the module's docstring says (once a process); returns what was
    done: "kept" (set now or before), "environment" or "off" (left as it was), or
    "unavailable" (no mallopt). A DUALGRAD_CPU_KEEP_MEMORY other than 0 or 1 raises
    InvalidValueError."""
    global _state
    value = os.environ.get(KEEP_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise InvalidValueError(f"environment variable {KEEP_ENV} is {value!r}; expected 1 "
                                "(keep freed arrays' memory for the next ones) or 0 (the C "
                                "library's defaults)")
    with _lock:
        if _state is None:
            _state = "off" if value == "0" else _set()
        return _state


def _set() -> str:
    if ("MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ
            or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")):
        return "environment"
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return "unavailable"
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
            and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
        return "unavailable"
    return "kept"
