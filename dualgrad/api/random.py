"""dualgrad's random generator: parameter initialisation and dropout seeds draw from it;
and ``Generator`` objects, generators of their own that the drawing functions take as
``generator=``, as PyTorch's."""
from __future__ import annotations

import numpy as np

from . import checks
from ..errors import bad_type

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


class Generator:
    """A generator of its own, as ``torch.Generator``: ``g = dg.Generator().manual_seed(42)``
    and ``generator=g`` where a function draws (``rand randn randint randperm multinomial
    bernoulli normal random_split DataLoader``, ``dg.nn.init``'s, ``t.uniform_()``,
    ``t.normal_()``) make it draw from ``g``, leaving the generator ``manual_seed`` seeds as
    it was. Draws are made on the host, so ``device`` changes nothing; the state is a
    JSON-serialisable dict (PyTorch's: a byte tensor)."""

    def __init__(self, device=None):
        if device is not None and not isinstance(device, str):
            raise bad_type("Generator", "device", device, "None or a device name")
        self.device = "cpu"
        self.seed()

    def manual_seed(self, seed: int) -> "Generator":
        """Seed it (an int >= 0); returns the generator, as PyTorch's."""
        self._seed = checks.integer("Generator.manual_seed", "seed", seed, 0)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Seed it from the operating system's entropy; returns the seed."""
        self.manual_seed(int(np.random.SeedSequence().entropy % 2 ** 63))
        return self._seed

    def initial_seed(self) -> int:
        """The seed it was last seeded with."""
        return self._seed

    def get_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> "Generator":
        self._rng.bit_generator.state = state
        return self


def source(fn: str, generator) -> np.random.Generator:
    """What ``fn`` draws from: ``generator`` (a Generator) or, for None, the generator
    ``manual_seed`` seeds."""
    if generator is None:
        return _generator
    if not isinstance(generator, Generator):
        raise bad_type(fn, "generator", generator, "None or a dg.Generator")
    return generator._rng
