"""dualgrad's random generator: parameter initialisation and dropout seeds draw from it."""
from __future__ import annotations

import numpy as np

from .errors import bad_type, bad_value

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the generator, so model initialisation and dropout masks repeat exactly."""
    global _generator
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise bad_type("manual_seed", "seed", seed, "a non-negative integer")
    if seed < 0:
        raise bad_value("manual_seed", "seed", seed, "a non-negative integer")
    _generator = np.random.default_rng(int(seed))


def generator() -> np.random.Generator:
    return _generator


def get_state() -> dict:
    """The generator's state (JSON-serialisable), for checkpoints."""
    return _generator.bit_generator.state


def set_state(state: dict) -> None:
    _generator.bit_generator.state = state
