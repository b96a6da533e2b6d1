"""Datasets and batches (``dg.data``; also ``dualgrad.utils.data``, PyTorch's module name):
see ``dualgrad.api.data``."""
from .api.data import (ConcatDataset, DataLoader, Dataset, Subset, TensorDataset,  # noqa: F401
                       random_split)

__all__ = ["DataLoader", "TensorDataset", "Dataset", "Subset", "ConcatDataset", "random_split"]
