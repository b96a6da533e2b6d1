"""Datasets and batches (``dg.data``): see ``dualgrad.api.data``."""
from .api.data import DataLoader, TensorDataset  # noqa: F401

__all__ = ["DataLoader", "TensorDataset"]
