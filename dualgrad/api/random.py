"""dualgrad's random generator: parameter initialisation and dropout seeds draw from it."""
from __future__ import annotations

import numpy as np

from . import checks

_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Seed the generator, so model initialisation and dropout masks repeat exactly."""
    global _generator
    _generator = np.random.default_rng(checks.integer("manual_seed", "seed", seed, 0))


def generator() -> np.random.Generator:
    return _generator


def get_state() -> dict:
    """The generator's state (JSON-serialisable), for checkpoints."""
    return _generator.bit_generator.state


def set_state(state: dict) -> None:
    _generator.bit_generator.state = state
