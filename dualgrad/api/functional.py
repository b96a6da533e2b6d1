"""``dg.nn.functional``: PyTorch's ``torch.nn.functional`` under its names and argument
lists, so code written as ``F.relu(x)``, ``F.cross_entropy(logits, y)`` or
``F.layer_norm(x, (d,))`` runs as it is.

Where dualgrad's own function already has PyTorch's signature it is the same object here
(``F.conv2d is dg.conv2d``); the rest are thin adapters over dualgrad's ops: argument order
(``embedding(input, weight)``), ``normalized_shape``, ``training=`` for dropout, the losses'
legacy ``size_average``/``reduce`` translated as PyTorch translates them, and ``inplace=``,
which is accepted as False only (dualgrad's ops never write into their inputs).
"""
from __future__ import annotations

import inspect
import warnings

from ..errors import DualgradWarning, InvalidValueError
from . import capture, checks, device, ops, random
from .attention import scaled_dot_product_attention  # noqa: F401
from .conv import conv1d, conv2d, conv_transpose2d  # noqa: F401
from .logic import one_hot  # noqa: F401
from .losses import (binary_cross_entropy as _bce, binary_cross_entropy_with_logits as _bce_logits,
                     cosine_similarity, kl_div as _kl_div, l1_loss as _l1_loss,  # noqa: F401
                     mse_loss as _mse_loss, nll_loss as _nll_loss,
                     smooth_l1_loss as _smooth_l1_loss, softmax_cross_entropy)
from .losses import huber_loss  # noqa: F401
from .nn import channel_ones, layer_norm_over, lookup
from .pair_losses import (cosine_embedding_loss, gaussian_nll_loss,  # noqa: F401
                          hinge_embedding_loss, margin_ranking_loss,
                          multilabel_soft_margin_loss, pairwise_distance, poisson_nll_loss,
                          soft_margin_loss, triplet_margin_loss)
from .normalization import batch_norm, group_norm, instance_norm, rms_norm  # noqa: F401
from .one_d import (adaptive_avg_pool1d, avg_pool1d, conv_transpose1d,  # noqa: F401
                    max_pool1d)
from .pointwise import hardshrink, prelu, softshrink, tanhshrink  # noqa: F401
from .pointwise import threshold as _threshold
from .indexing import _axis, chunk, pad  # noqa: F401
from .ops import (gelu, linear, logsigmoid, sigmoid, softplus, softsign,  # noqa: F401
                  tanh)
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401
from .reductions import norm
from .resampling import interpolate, pixel_shuffle, pixel_unshuffle  # noqa: F401
from .windows import fold, unfold  # noqa: F401


def _not_inplace(fn: str, inplace) -> None:
    if checks.flag(fn, "inplace", inplace):
        raise InvalidValueError(f"{fn}: argument 'inplace' is True; dualgrad's ops never "
                                "write into their input: use the result (inplace=False)")


# -- activations ------------------------------------------------------------------------------
def _without_inplace(op, *params):
    """torch.nn.functional's ``op(input, <params>, inplace=False)``: dualgrad's op of that
    name (which takes the same parameters), ``inplace`` accepted as False only."""
    names = [name for name, _ in params]

    def fn(input, *args, **kwargs):  # noqa: A002 - PyTorch's argument names
        inplace = kwargs.pop("inplace", False)
        if len(args) > len(names):          # (inplace given positionally, after the rest)
            args, inplace = args[:len(names)], args[len(names)]
        _not_inplace(op.__name__, inplace)
        return op(input, *args, **kwargs)
    parameter = inspect.Parameter
    fn.__signature__ = inspect.Signature(
        [parameter("input", parameter.POSITIONAL_OR_KEYWORD)] +
        [parameter(name, parameter.POSITIONAL_OR_KEYWORD, default=value)
         for name, value in params] +
        [parameter("inplace", parameter.POSITIONAL_OR_KEYWORD, default=False)])
    fn.__name__ = fn.__qualname__ = op.__name__
    fn.__doc__ = f"``dg.{op.__name__}``: " + (op.__doc__ or "").split("\n")[0]
    return fn


relu = _without_inplace(ops.relu)
relu6 = _without_inplace(ops.relu6)
elu = _without_inplace(ops.elu, ("alpha", 1.0))
selu = _without_inplace(ops.selu)
celu = _without_inplace(ops.celu, ("alpha", 1.0))
leaky_relu = _without_inplace(ops.leaky_relu, ("negative_slope", 0.01))
hardtanh = _without_inplace(ops.hardtanh, ("min_val", -1.0), ("max_val", 1.0))
hardsigmoid = _without_inplace(ops.hardsigmoid)
hardswish = _without_inplace(ops.hardswish)
silu = _without_inplace(ops.silu)
mish = _without_inplace(ops.mish)


def threshold(input, threshold: float, value: float, inplace: bool = False):  # noqa: A002
    """input where input > threshold, else value."""
    _not_inplace("threshold", inplace)
    return _threshold(input, threshold, value)


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = input1 . weight[o] . input2 + bias[o], as
    ``torch.nn.functional.bilinear`` (weight (out, in1, in2))."""
    from .linalg import einsum
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else ops.add(y, bias)


def glu(input, dim: int = -1):  # noqa: A002
    """a * sigmoid(b), a and b the two halves of ``input`` along ``dim`` (of even length)."""
    x = ops._tensor("glu", "input", input, low_precision=True)
    if x.ndim == 0:
        raise InvalidValueError("glu: argument 'input' is 0-d; expected at least one axis")
    axis = _axis("glu", "dim", dim, x.ndim)
    if x.shape[axis] % 2:
        raise InvalidValueError(f"glu: argument 'input' has length {x.shape[axis]} along "
                                f"dim {dim}; expected an even length (it is halved)")
    a, b = chunk(x, 2, axis)
    return ops.mul(a, ops.sigmoid(b))


def _softmax_dim(fn: str, dim, ndim: int) -> int:
    """PyTorch's choice of axis for a softmax called without ``dim`` (deprecated there:
    it warns, as this does)."""
    if dim is not None:
        return dim
    warnings.warn(f"{fn}: no 'dim' given: as PyTorch, the axis is chosen from the rank "
                  "(0 for 0-, 1- and 3-D inputs, else 1); pass dim=", DualgradWarning,
                  stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _typed(fn: str, input, dtype):  # noqa: A002
    x = ops._tensor(fn, "input", input, low_precision=True)
    if dtype is not None:
        from .logic import to
        x = to(x, dtype)
    return x


def softmax(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    x = _typed("softmax", input, dtype)
    return ops.softmax(x, dim=_softmax_dim("softmax", dim, x.ndim))


def log_softmax(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    x = _typed("log_softmax", input, dtype)
    return ops.log_softmax(x, dim=_softmax_dim("log_softmax", dim, x.ndim))


def softmin(input, dim=None, _stacklevel: int = 3, dtype=None):  # noqa: A002
    """softmax(-input)."""
    x = _typed("softmin", input, dtype)
    return ops.softmax(ops.neg(x), dim=_softmax_dim("softmin", dim, x.ndim))


def normalize(input, p: float = 2.0, dim: int = 1, eps: float = 1e-12):  # noqa: A002
    """input / max(norm_p(input along dim), eps), as PyTorch's."""
    x = ops._tensor("normalize", "input", input, low_precision=True)
    eps = checks.number("normalize", "eps", eps, 0.0)
    n = norm(x, p, dim=dim, keepdim=True)
    return ops.div(x, ops.clamp(n, min=eps))


# -- layers' functions ------------------------------------------------------------------------
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5):  # noqa: A002
    """Layer norm over the trailing axes ``normalized_shape`` (an int or a tuple)."""
    dims = normalized_shape if isinstance(normalized_shape, (tuple, list)) else \
        (normalized_shape,)
    if not dims:
        raise InvalidValueError("layer_norm: argument 'normalized_shape' is empty; expected "
                                "at least one size")
    shape = tuple(checks.integer("layer_norm", "normalized_shape", n, 1) for n in dims)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(getattr(t, "shape", ())) != shape:
            raise InvalidValueError(f"layer_norm: argument '{name}' has shape "
                                    f"{tuple(getattr(t, 'shape', ()))}; expected "
                                    f"normalized_shape {shape}")
    eps = checks.number("layer_norm", "eps", eps, 0.0, lo_open=True)
    return layer_norm_over(input, shape, weight, bias, eps, "layer_norm")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,  # noqa: A002
              scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of ``weight`` at the indices ``input``; with ``padding_idx`` that row takes no
    gradient. ``max_norm``, ``scale_grad_by_freq`` and ``sparse`` are not offered."""
    for name, value, default in (("max_norm", max_norm, None),
                                 ("scale_grad_by_freq", scale_grad_by_freq, False),
                                 ("sparse", sparse, False)):
        if value is not default and value != default:
            raise InvalidValueError(f"embedding: argument '{name}' is {value!r}; only "
                                    f"{default!r} is supported")
    if padding_idx is not None:
        rows = weight.shape[0] if hasattr(weight, "shape") and len(weight.shape) else 0
        padding_idx = checks.integer("embedding", "padding_idx", padding_idx, -rows,
                                     rows) % rows
    return lookup(weight, input, padding_idx)


def dropout(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """In training, each element zeroed with probability ``p`` and the rest scaled by
    1 / (1 - p); the mask drawn from dualgrad's generator (``manual_seed``), a new one each
    call and each replay of a captured step."""
    p = checks.number("dropout", "p", p, 0.0, 1.0)
    training = checks.flag("dropout", "training", training)
    _not_inplace("dropout", inplace)
    if not training or p == 0.0:
        return ops._tensor("dropout", "input", input, low_precision=True)
    # a recomputation (checkpoint) takes the first run's seed from the log: draw nothing
    seed = 0 if ops.recomputing() else _draw()
    out = ops.dropout(input, p, seed, 0)
    if not ops.recomputing():
        capture.on_replay(lambda: (training, p),
                          lambda: device.active().replay_dropout((seed, 0), _draw(), 0))
    return out


def _channel_dropout(fn: str, spatial: int, input, p, training, inplace):  # noqa: A002
    """Whole channels zeroed (the mask (N, C, 1, ...) dropped out, times the input)."""
    p = checks.number(fn, "p", p, 0.0, 1.0)
    training = checks.flag(fn, "training", training)
    _not_inplace(fn, inplace)
    x, ones = channel_ones(fn, "input", input, spatial)
    if not training or p == 0.0:
        return x
    return ops.mul(x, dropout(ones, p, True))


def dropout1d(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """Whole channels of (N, C, L) or (C, L) zeroed with probability ``p``, the rest scaled
    by 1 / (1 - p), in training."""
    return _channel_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(input, p: float = 0.5, training: bool = True, inplace: bool = False):  # noqa: A002
    """Whole channels of (N, C, H, W) or (C, H, W) zeroed with probability ``p``, the rest
    scaled by 1 / (1 - p), in training."""
    return _channel_dropout("dropout2d", 2, input, p, training, inplace)


def _draw() -> int:
    return int(random.generator().integers(0, 2 ** 63))


# -- losses -----------------------------------------------------------------------------------
def _legacy(fn: str, size_average, reduce, reduction: str) -> str:  # noqa: A002
    """PyTorch's translation of the deprecated ``size_average`` and ``reduce``: either one
    given overrides ``reduction`` (reduce False: 'none'; else size_average False: 'sum';
    else 'mean')."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else checks.flag(fn, "size_average",
                                                                   size_average)
    reduce = True if reduce is None else checks.flag(fn, "reduce", reduce)
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def cross_entropy(input, target, weight=None, size_average=None,  # noqa: A002
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0):
    """``softmax_cross_entropy``: class indices or probabilities as targets."""
    return softmax_cross_entropy(input, target, weight, ignore_index, label_smoothing,
                                 _legacy("cross_entropy", size_average, reduce, reduction))


def nll_loss(input, target, weight=None, size_average=None, ignore_index: int = -100,  # noqa: A002
             reduce=None, reduction: str = "mean"):
    return _nll_loss(input, target, weight, ignore_index,
                     _legacy("nll_loss", size_average, reduce, reduction))


def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):  # noqa: A002
    return _mse_loss(input, target, _legacy("mse_loss", size_average, reduce, reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):  # noqa: A002
    return _l1_loss(input, target, _legacy("l1_loss", size_average, reduce, reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None,  # noqa: A002
                   reduction: str = "mean", beta: float = 1.0):
    return _smooth_l1_loss(input, target,
                           _legacy("smooth_l1_loss", size_average, reduce, reduction), beta)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                         reduction: str = "mean"):
    return _bce(input, target, weight,
                _legacy("binary_cross_entropy", size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,  # noqa: A002
                                     reduce=None, reduction: str = "mean", pos_weight=None):
    return _bce_logits(input, target, weight,
                       _legacy("binary_cross_entropy_with_logits", size_average, reduce,
                               reduction), pos_weight)


def kl_div(input, target, size_average=None, reduce=None, reduction: str = "mean",  # noqa: A002
           log_target: bool = False):
    return _kl_div(input, target, _legacy("kl_div", size_average, reduce, reduction),
                   log_target)


__all__ = [
    "relu", "relu6", "elu", "selu", "celu", "leaky_relu", "hardtanh", "hardsigmoid",
    "hardswish", "silu", "mish", "gelu", "sigmoid", "tanh", "softplus", "softsign",
    "logsigmoid", "glu", "hardshrink", "softshrink", "tanhshrink", "threshold", "bilinear",
    "softmax", "log_softmax", "softmin", "normalize",
    "linear", "conv1d", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "unfold", "fold", "pad", "one_hot", "interpolate",
    "pixel_shuffle", "pixel_unshuffle",
    "layer_norm", "batch_norm", "group_norm", "rms_norm", "instance_norm", "embedding",
    "dropout", "dropout1d", "dropout2d", "prelu", "max_pool1d", "avg_pool1d",
    "adaptive_avg_pool1d", "conv_transpose1d",
    "scaled_dot_product_attention",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "cosine_similarity", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
    "cosine_embedding_loss", "pairwise_distance", "triplet_margin_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "multilabel_soft_margin_loss",
]
