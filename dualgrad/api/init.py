"""``dg.nn.init``: fill a tensor in place as ``torch.nn.init`` does, drawing from dualgrad's
generator (``manual_seed``) or the ``generator=`` given (a ``dg.Generator``). Each function
returns the tensor; on the gpu the values are written into its device storage."""
from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidValueError, bad_shape, bad_type, bad_value
from . import checks
from .random import source
from .residency import store_weight
from .tensor import Tensor

_GAINS = {"linear": 1.0, "identity": 1.0, "conv1d": 1.0, "conv2d": 1.0, "conv3d": 1.0,
          "conv_transpose1d": 1.0, "conv_transpose2d": 1.0, "conv_transpose3d": 1.0,
          "sigmoid": 1.0, "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0), "selu": 0.75}


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table; leaky_relu's ``param`` is
    its negative slope, 0.01 by default)."""
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else checks.number("calculate_gain", "param", param)
        return math.sqrt(2.0 / (1.0 + slope ** 2))
    if nonlinearity not in _GAINS:
        raise InvalidValueError(f"calculate_gain: argument 'nonlinearity' is {nonlinearity!r}; "
                                f"expected one of {sorted([*_GAINS, 'leaky_relu'])}")
    return _GAINS[nonlinearity]


def _target(fn: str, tensor) -> Tensor:
    if not isinstance(tensor, Tensor):
        raise bad_type(fn, "tensor", tensor, "a Tensor (a Parameter)")
    return tensor


def _fill(tensor: Tensor, values) -> Tensor:
    store_weight(tensor, np.asarray(values, dtype=tensor.dtype).reshape(tensor.shape))
    return tensor


def _fans(fn: str, tensor: Tensor) -> tuple:
    """(fan_in, fan_out): PyTorch's, from a weight of shape (out, in, *kernel)."""
    if len(tensor.shape) < 2:
        raise bad_shape(fn, "tensor", tensor.shape, "at least 2 dimensions (out, in, ...)")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(fn: str, tensor: Tensor, mode: str) -> int:
    fan_in, fan_out = _fans(fn, tensor)
    if mode not in ("fan_in", "fan_out"):
        raise InvalidValueError(f"{fn}: argument 'mode' is {mode!r}; expected 'fan_in' or "
                                "'fan_out'")
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Values drawn uniformly from [a, b)."""
    t = _target("uniform_", tensor)
    lo, hi = checks.number("uniform_", "a", a), checks.number("uniform_", "b", b)
    return _fill(t, source("uniform_", generator).uniform(lo, hi, t.shape))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Values drawn from N(mean, std^2)."""
    t = _target("normal_", tensor)
    mu = checks.number("normal_", "mean", mean)
    sigma = checks.number("normal_", "std", std, 0.0)
    return _fill(t, source("normal_", generator).normal(mu, sigma, t.shape))


def constant_(tensor, val: float) -> Tensor:
    """Every value ``val``."""
    t = _target("constant_", tensor)
    return _fill(t, np.full(t.shape, checks.number("constant_", "val", val)))


def _bound(fn: str, name: str, value) -> float:
    """A truncation bound: a number, infinite allowed (no bound on that side)."""
    if not checks.is_number(value) or math.isnan(value):
        raise bad_type(fn, name, value, "a number (inf and -inf allowed)")
    return float(value)


def _standard_truncated(rng, lo: float, hi: float, n: int) -> np.ndarray:
    """n exact draws of a standard normal restricted to [lo, hi], by rejection from the
    proposal that suits the interval (Robert, 1995): the normal itself where it is wide
    and holds 0, a uniform over it where it is narrow, an exponential from the nearer
    bound where it lies in a tail. Each keeps most of its draws, however far out the
    interval lies."""
    if hi <= 0.0:                          # (the left tail: the right one, mirrored)
        return -_standard_truncated(rng, -hi, -lo, n)
    out = np.empty(n)
    todo = np.arange(n)
    rate = (lo + math.sqrt(lo * lo + 4.0)) / 2.0 if lo >= 0.0 else 0.0
    while todo.size:
        m = todo.size
        if lo < 0.0 and hi - lo >= 1.0:
            z = rng.standard_normal(m)
            keep = (z >= lo) & (z <= hi)
        elif lo < 0.0 or rate * (hi - lo) < 1.0:
            z = rng.uniform(lo, hi, m)
            peak = 0.0 if lo < 0.0 else lo      # (where the density is highest)
            keep = rng.random(m) <= np.exp((peak * peak - z * z) / 2.0)
        else:
            z = lo + rng.exponential(1.0 / rate, m)
            keep = (z <= hi) & (rng.random(m) <= np.exp(-(z - rate) ** 2 / 2.0))
        out[todo[keep]] = z[keep]
        todo = todo[~keep]
    return out


def trunc_normal_(tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Values drawn from N(mean, std^2) restricted to [a, b] (bounds in the values'
    units, as PyTorch's), drawn exactly however far [a, b] lies from the mean (PyTorch's
    inverse-CDF method warns past 2 std)."""
    fn = "trunc_normal_"
    t = _target(fn, tensor)
    mu = checks.number(fn, "mean", mean)
    sigma = checks.number(fn, "std", std, 0.0)
    lo, hi = _bound(fn, "a", a), _bound(fn, "b", b)
    if not lo < hi:
        raise bad_value(fn, "b", b, f"a bound above a ({a})")
    draws = source(fn, generator)
    n = math.prod(t.shape)
    if sigma == 0.0:
        return _fill(t, np.full(n, min(max(mu, lo), hi)))
    z = _standard_truncated(draws, (lo - mu) / sigma, (hi - mu) / sigma, n)
    return _fill(t, np.clip(mu + sigma * z, lo, hi))


def eye_(tensor) -> Tensor:
    """The identity matrix (a 2-D tensor), as ``torch.nn.init.eye_``."""
    t = _target("eye_", tensor)
    if len(t.shape) != 2:
        raise bad_shape("eye_", "tensor", t.shape, "2 dimensions")
    return _fill(t, np.eye(*t.shape))


def dirac_(tensor, groups: int = 1) -> Tensor:
    """A convolution weight (out, in, *kernel) that passes its input through: in each of
    ``groups`` blocks of out / groups filters, filter i is 1 at input channel i and the
    kernel's centre, for i below the block's input channels; 0 elsewhere."""
    t = _target("dirac_", tensor)
    if not 3 <= len(t.shape) <= 5:
        raise bad_shape("dirac_", "tensor", t.shape, "3, 4 or 5 dimensions (out, in, *kernel)")
    g = checks.integer("dirac_", "groups", groups, 1)
    if t.shape[0] % g:
        raise bad_value("dirac_", "groups", groups, f"a divisor of the {t.shape[0]} filters")
    values = np.zeros(t.shape)
    per_group = t.shape[0] // g
    centre = tuple(k // 2 for k in t.shape[2:])
    for group in range(g):
        for i in range(min(per_group, t.shape[1])):
            values[(group * per_group + i, i) + centre] = 1.0
    return _fill(t, values)


def zeros_(tensor) -> Tensor:
    return constant_(tensor, 0.0)


def ones_(tensor) -> Tensor:
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot and Bengio, 2010)."""
    t = _target("xavier_uniform_", tensor)
    fan_in, fan_out = _fans("xavier_uniform_", t)
    bound = checks.number("xavier_uniform_", "gain", gain) * math.sqrt(6.0 / (fan_in + fan_out))
    return _fill(t, source("xavier_uniform_", generator).uniform(-bound, bound, t.shape))


def xavier_normal_(tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    t = _target("xavier_normal_", tensor)
    fan_in, fan_out = _fans("xavier_normal_", t)
    std = checks.number("xavier_normal_", "gain", gain) * math.sqrt(2.0 / (fan_in + fan_out))
    return _fill(t, source("xavier_normal_", generator).normal(0.0, std, t.shape))


def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """U(-b, b), b = gain * sqrt(3 / fan) (He et al., 2015); gain from ``nonlinearity``
    (``a``: leaky_relu's negative slope)."""
    t = _target("kaiming_uniform_", tensor)
    fan = _fan("kaiming_uniform_", t, mode)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan)
    return _fill(t, source("kaiming_uniform_", generator).uniform(-bound, bound, t.shape))


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """N(0, std^2), std = gain / sqrt(fan)."""
    t = _target("kaiming_normal_", tensor)
    fan = _fan("kaiming_normal_", t, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _fill(t, source("kaiming_normal_", generator).normal(0.0, std, t.shape))


def orthogonal_(tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain``, the tensor seen as (shape[0], the rest):
    Q of the QR decomposition of a Gaussian matrix, its columns' signs fixed by R's
    diagonal (Saxe et al., 2013)."""
    t = _target("orthogonal_", tensor)
    if len(t.shape) < 2:
        raise bad_shape("orthogonal_", "tensor", t.shape, "at least 2 dimensions")
    g = checks.number("orthogonal_", "gain", gain)
    rows = t.shape[0]
    cols = math.prod(t.shape) // rows if rows else 0
    flat = source("orthogonal_", generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(t, g * q)


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_",
           "ones_", "eye_", "dirac_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "orthogonal_"]
