"""``dg.autograd``: ``grad`` (and ``backward``), under PyTorch's module name
(``torch.autograd``): see ``dualgrad.api.tape``."""
from .api.gradcheck import gradcheck  # noqa: F401
from .api.tape import backward, grad  # noqa: F401

__all__ = ["grad", "backward", "gradcheck"]
