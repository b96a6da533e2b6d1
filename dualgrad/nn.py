"""Layers (``dg.nn``): see ``dualgrad.api.nn``."""
from .api.nn import (GELU, Dropout, Embedding, LayerNorm, Linear, Module, ReLU,  # noqa: F401
                     Sequential, Sigmoid, Tanh)

__all__ = ["Module", "Linear", "Sequential", "ReLU", "GELU", "Tanh", "Sigmoid", "LayerNorm",
           "Embedding", "Dropout"]
