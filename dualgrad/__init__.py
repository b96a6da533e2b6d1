"""dualgrad: autograd with two interchangeable backends behind one API.

``cpu`` (the default) runs Numba kernels and is the numerical reference; ``gpu`` runs Vulkan
compute shaders with parameters and optimizer state resident in device memory. Select one
with ``ag_device()``; the same training code runs on both.
"""
# NumPy imports numpy.ma on first touch, and Numba's argument typing touches it. Two of our
# threads touching it first at once can recurse in that lazy import (the module is marked
# loaded a moment before it is set on numpy): importing it here, before any thread, avoids it.
import numpy.ma  # noqa: F401

from .api.capture import CapturedStep, capture_step
from .api.device import (ag_device, devices, reset_peak_memory_stats, reset_transfer_stats,
                         tape_mem, transfer_stats)
from .errors import (ArgumentTypeError, AxisOutOfRange, CallOrderError, CheckpointError,
                     CheckpointFileError, CheckpointNotFoundError, DeadTensorError, DeviceError,
                     DeviceOutOfMemory, DeviceUnavailable, DualgradError, DualgradWarning,
                     GradcheckError, GraphFreedError, IndexOutOfRange, IndexShapeError,
                     InvalidValueError, ShapeError, TensorTooLarge, ValidationError)
from .api.io import load_checkpoint, save_checkpoint
from .api.serialization import load, save
from .api.torch_io import load_torch_state_dict, read_safetensors
from .api import creation as _creation
from .api import indexing as _indexing
from .api import losses as _losses
from .api import logic as _logic
from .api import reductions as _reductions
from .api import sorting as _sorting
from .api import conv as _conv
from .api import pooling as _pooling
from .api import windows as _windows
from .api import normalization as _normalization
from .api import attention as _attention
from .api import linalg as _linalg
from .api import resampling as _resampling
from .api import pointwise as _pointwise
from .api import statistics as _statistics
from .api import one_d as _one_d
from .api import pair_losses as _pair_losses
from .api import sampling as _sampling
from .api import arrangements as _arrangements
from .api import placement as _placement
from .api import ops as _ops
from .api.creation import *  # noqa: F401,F403  (zeros, ones, arange, ...: creation.__all__)
from .api.ops import *  # noqa: F401,F403  (matmul, add, exp, relu, ...: ops.__all__)
from .api.losses import *  # noqa: F401,F403  (mse_loss, nll_loss, ...: losses.__all__)
from .api.indexing import *  # noqa: F401,F403  (squeeze, flip, ...: indexing.__all__)
from .api.reductions import *  # noqa: F401,F403  (min, var, ...: reductions.__all__)
from .api.logic import *  # noqa: F401,F403  (eq, where, any, ...: logic.__all__)
from .api.sorting import *  # noqa: F401,F403  (sort, argsort, topk, searchsorted ...)
from .api.conv import *  # noqa: F401,F403  (conv1d, conv2d, conv_transpose2d)
from .api.pooling import *  # noqa: F401,F403  (max_pool2d, avg_pool2d, ...)
from .api.windows import *  # noqa: F401,F403  (unfold, fold)
from .api.normalization import *  # noqa: F401,F403  (batch_norm, group_norm, rms_norm)
from .api.attention import *  # noqa: F401,F403  (scaled_dot_product_attention)
from .api.linalg import *  # noqa: F401,F403  (einsum, bmm, outer, ...)
from .api.resampling import pixel_shuffle, pixel_unshuffle  # noqa: F401
from .api.pointwise import *  # noqa: F401,F403  (logaddexp, hypot, nan_to_num)
from .api.statistics import *  # noqa: F401,F403  (median, quantile, nansum, ...)
from .api.one_d import *  # noqa: F401,F403  (max_pool1d, avg_pool1d, conv_transpose1d, ...)
from .api.pair_losses import *  # noqa: F401,F403  (triplet_margin_loss, ...)
from .api.sampling import *  # noqa: F401,F403  (multinomial)
from .api.arrangements import *  # noqa: F401,F403  (tile, meshgrid, rot90, ...)
from .api.placement import *  # noqa: F401,F403  (index_fill, index_copy, index_add, scatter)
from .api.amp import GradScaler
from .api.autocast import autocast, is_autocast_enabled
from .api.checkpointing import checkpoint
from .api.gradcheck import gradcheck
from .api.optim import clip_grad_norm, clip_grad_value
from .api.optimizers import optimizer_adam, optimizer_adamw, optimizer_sgd
from .api.device_names import device
from .api.random import Generator, manual_seed
from .determinism import are_deterministic_algorithms_enabled, use_deterministic_algorithms
from .api.tape import backward, inference_mode, is_grad_enabled, no_grad, with_grad_tape
from .api.tensor import Parameter, Tensor, ag_data, ag_param, ag_tensor
from .api.tensor import BFLOAT16 as bfloat16, DEFAULT_DTYPE as float32, FLOAT16 as float16
from .api.tensor import dtype_names as _dtype_names

# PyTorch's dtype names: float64 double half float int32 int64 long int bool (integer
# tensors are int32: int64 and long name it too). They shadow Python's float, int and bool
# in this module's namespace, whose code calls none of those.
globals().update(_dtype_names())
# Submodules, after the names they use.
from . import amp, autograd, cuda, data, nn, optim, residency, texts, utils  # noqa: E402
from .api import methods as _methods  # noqa: E402
from .api import inplace as _inplace  # noqa: E402

_methods.install(globals())     # (t.exp(), t.transpose(0, 1), t.size(1), ...: PyTorch's names)
_inplace.install()               # (t.zero_(), t.add_(g, alpha=-lr), ...)

__version__ = "0.1.0"

__all__ = [
    "ag_device", "devices", "tape_mem", "reset_peak_memory_stats", "transfer_stats",
    "reset_transfer_stats",
    "Tensor", "Parameter", "ag_tensor", "ag_param", "ag_data", "float32", "float16", "bfloat16",
    "float64", "double", "half", "float", "int32", "int64", "long", "int", "bool",
    "with_grad_tape", "no_grad", "inference_mode", "is_grad_enabled", "backward", "manual_seed",
    "Generator", "device", "capture_step", "CapturedStep",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    *_ops.__all__, *_losses.__all__, *_indexing.__all__, *_reductions.__all__, *_logic.__all__,
    *_sorting.__all__, *_conv.__all__, *_pooling.__all__, *_windows.__all__,
    *_normalization.__all__, *_attention.__all__, *_linalg.__all__,
    "pixel_shuffle", "pixel_unshuffle", *_pointwise.__all__, *_statistics.__all__,
    *_one_d.__all__, *_pair_losses.__all__, *_sampling.__all__,
    *_arrangements.__all__, *_placement.__all__,
    *_creation.__all__,
    "optimizer_sgd", "optimizer_adam", "optimizer_adamw", "clip_grad_norm",
    "clip_grad_value", "gradcheck", "checkpoint", "autocast", "is_autocast_enabled",
    "GradScaler",
    "save_checkpoint", "load_checkpoint", "save", "load", "load_torch_state_dict", "read_safetensors",
    "DualgradError", "IndexOutOfRange", "AxisOutOfRange", "IndexShapeError", "ShapeError",
    "InvalidValueError", "ArgumentTypeError", "CallOrderError",
    "DeviceUnavailable", "DeadTensorError", "GraphFreedError", "DeviceError",
    "DeviceOutOfMemory", "DualgradWarning",
    "TensorTooLarge", "GradcheckError", "CheckpointError", "CheckpointFileError", "CheckpointNotFoundError",
    "ValidationError", "amp", "data", "nn", "optim", "residency", "texts",
]
