"""Layers (``dg.nn``): see ``dualgrad.api.nn``."""
from .api import init  # noqa: F401  (dg.nn.init)
from .api import nn as _nn
from .api.nn import *  # noqa: F401,F403

__all__ = [*_nn.__all__, "init"]
