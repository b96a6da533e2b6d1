"""Layers (``dg.nn``): see ``dualgrad.api.nn``."""
from ..api import init  # noqa: F401  (dg.nn.init)
from ..api import conv_layers as _conv_layers
from ..api import loss_layers as _loss_layers
from ..api import norm_layers as _norm_layers
from ..api import transformer as _transformer
from ..api import recurrent as _recurrent
from ..api import nn as _nn
from . import functional, utils  # noqa: F401  (dg.nn.functional, dg.nn.utils)
from ..api.conv_layers import *  # noqa: F401,F403
from ..api.loss_layers import *  # noqa: F401,F403
from ..api.norm_layers import *  # noqa: F401,F403
from ..api.transformer import *  # noqa: F401,F403
from ..api.recurrent import *  # noqa: F401,F403
from ..api.nn import *  # noqa: F401,F403
from ..api.nn import NNParameter as Parameter

__all__ = [*_nn.__all__, *_conv_layers.__all__, *_norm_layers.__all__, *_transformer.__all__, *_recurrent.__all__, *_loss_layers.__all__, "init", "functional",
           "utils", "Parameter"]
