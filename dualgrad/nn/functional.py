"""PyTorch's ``torch.nn.functional`` under its names (``import dualgrad.nn.functional as F``):
see ``dualgrad.api.functional``."""
from ..api.functional import *  # noqa: F401,F403
from ..api.functional import __all__  # noqa: F401
