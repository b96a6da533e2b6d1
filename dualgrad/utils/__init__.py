"""``dualgrad.utils.data`` is ``dg.data`` under PyTorch's module name
(``torch.utils.data``)."""
from . import data  # noqa: F401

__all__ = ["data"]
