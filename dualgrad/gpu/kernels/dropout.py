"""dropout.comp: the Philox mask of (seed, step, element index); the twin of
``dualgrad/cpu/dropout.py``. While a step is recorded, seed and step come from a slot of
the recording's scalar buffer, which a replay rewrites."""
from __future__ import annotations

import struct

from ...backend import dropout_scale, dropout_threshold
from ..dispatch import grid, push_constants


def seed_step(seed: int, step: int) -> list:
    """Dropout's seed and step as the four 32-bit words the shader takes."""
    return [seed & 0xFFFFFFFF, seed >> 32, step & 0xFFFFFFFF, step >> 32]


def dropout(dev, x, p, seed, step):
    out = dev.empty(x.shape)
    if x.size:
        scale, words = dropout_scale(p, x.dtype), seed_step(seed, step)
        if dev.capture is None:
            spec, push = (), push_constants((x.address, out.address),
                                            (x.size, dropout_threshold(p), *words), (scale,))
        else:                     # seed and step from a slot a replay rewrites
            slot = dev.capture.keyed_slot(("dropout", seed, step), words)
            spec, push = (1,), push_constants((x.address, out.address),
                                              (x.size, dropout_threshold(p), 0, 0, 0, 0),
                                              (scale,)) + struct.pack("<4xQ", slot)
        dev.launch("dropout", spec, push, grid(-(-x.size // 4)), [x], [out])
    return out


def replay_dropout(dev, recorded: tuple, seed: int, step: int) -> None:
    if dev.sink is not None:
        dev.sink.put_keyed(("dropout", *recorded), seed_step(seed, step))
