"""``dg.data`` under PyTorch's module name: ``from dualgrad.utils.data import DataLoader``."""
from ..data import *  # noqa: F401,F403
from ..data import __all__  # noqa: F401
