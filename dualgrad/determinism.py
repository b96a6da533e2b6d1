"""Whether results must be the same bits from run to run, as PyTorch's
``torch.use_deterministic_algorithms``.

Every kernel of both backends adds in a fixed order but one: on a device that adds float32
atomically, fused attention's backward adds dq's shares of 32 keys as their workgroups
finish (docs/numerics.md). With deterministic algorithms on, it takes the kernels that
make dq in an order of their own instead (a little slower: bench/RESULTS.md). The setting
is read when a kernel is launched: a step captured before it changed replays as captured.
"""
from __future__ import annotations

import numpy as np

from .errors import bad_type

_enabled = False


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Make every op give the same bits from run to run (``mode`` True), or allow the
    faster order-free kernels (False, the default). ``warn_only`` is PyTorch's: no op here
    lacks a deterministic form, so it changes nothing."""
    global _enabled
    for name, value in (("mode", mode), ("warn_only", warn_only)):
        if not isinstance(value, (bool, np.bool_)):
            raise bad_type("use_deterministic_algorithms", name, value, "True or False")
    _enabled = bool(mode)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True)`` is in effect."""
    return _enabled
