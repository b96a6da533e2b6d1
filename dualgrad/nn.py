"""Layers (``dg.nn``): see ``dualgrad.api.nn``."""
from .api import nn as _nn
from .api.nn import *  # noqa: F401,F403

__all__ = list(_nn.__all__)
