"""The ops users call. Each checks its arguments, runs the active backend's kernel, and —
right beside the forward — defines the rule that maps the output's gradient to its inputs'.

A backward rule is a closure ``backward(g, needs) -> tuple`` over the forward's saved
storage handles; ``needs[i]`` says whether input i wants a gradient (None where not): true,
or a ``tape.Into`` (``tape.into(needs[i])``: storage the gradient may be written into, a
leaf's first ``.grad``; a rule whose kernel takes an output writes it there, which saves a
copy). An op may leave the tape a transform it owes its output's gradient, and a consumer
may apply it as it writes its own gradient (``tape.Settled``): ``ThroughRelu``, a linear
layer made with its ReLU, is one. Rules call backend kernels directly, so backward records
nothing.

The unary ops that are public as they are (``exp``, ``relu``, ...) are made from their
entries in ``dualgrad.kernel_ops`` (``_public_unary`` below).
"""
from __future__ import annotations

import builtins
import math

import threading

import numpy as np

from ..backend import PLAIN, Epilogue
from ..errors import (ArgumentTypeError, IndexOutOfRange, InvalidValueError, ShapeError,
                      bad_axis, bad_shape, bad_type, bad_value)
from ..kernel_ops import UNARY, UNARY_GRAD_READS, KernelOp
from ..shapes import MAX_RANK, broadcast_strides, reduced_shape
from . import autocast, capture, checks, device, tape
from .checks import is_number
from .low_precision import (computes_in_float32, converted, in_input_type,
                            refuse_low_precision)
from .residency import adopt, handle
from .tensor import (DEFAULT_DTYPE, INT32, LOW_PRECISION, Tensor, ag_tensor, host_array,
                     is_float, resolve_dtype)


# ---------------------------------------------------------------------------------------------
# Helpers

def _tensor(fn: str, name: str, x, like=None, any_dtype: bool = False,
            low_precision: bool = False) -> Tensor:
    """A Tensor argument; a NumPy array or nested list becomes a constant tensor (of the
    dtype of ``like`` when that is a float Tensor, else float32). Integer and boolean
    tensors are refused unless ``any_dtype`` (an op that only moves elements); float16 and
    bfloat16 ones (see low_precision.py) unless ``low_precision`` (kernels that take them)."""
    if isinstance(x, Tensor):
        if low_precision and x.dtype in LOW_PRECISION:
            return x
        refuse_low_precision(fn, name, x)
        if not any_dtype and not is_float(x.dtype):
            raise ArgumentTypeError(f"{fn}: argument '{name}' is a {x.dtype} tensor; expected "
                                    "a float tensor (convert it with .float())")
        return x
    if isinstance(x, (np.ndarray, list, tuple)):
        value = host_array(fn, name, x, like.dtype if isinstance(like, Tensor) and
                           is_float(like.dtype) else None)
        if value.ndim > MAX_RANK:
            raise bad_shape(fn, name, value.shape, f"at most {MAX_RANK} dimensions")
        return ag_tensor(value, dtype=value.dtype)
    raise bad_type(fn, name, x, "a Tensor or a NumPy array")


def _filled(backend, shape: tuple, value: float, dtype):
    """Storage filled on the device (no upload, so a recorded step keeps it)."""
    h = backend.empty(shape, dtype)
    backend.fill(h, value)
    return h


def _constant(shape: tuple, value: float, dtype) -> Tensor:
    """A tensor filled on the device."""
    backend = device.active()
    return adopt(backend, Tensor(shape, dtype), _filled(backend, shape, value, dtype))


def _make(h, inputs: tuple, backward, backend, owed=None, seeded=None,
          dtype=None) -> Tensor:
    """Wrap a kernel's output handle in a Tensor and record how it was made (``owed``: a
    transform the tape applies to the output's gradient before ``backward``; ``seeded``:
    the inputs' gradients for an output gradient of one, made by the forward: see
    tape.py). ``dtype``: the tensor's (by default the storage's)."""
    out = adopt(backend, Tensor(h.shape, h.dtype if dtype is None else dtype), h)
    return tape.record(out, inputs, backward, backend, owed, seeded)


def _same_dtype(fn: str, a: Tensor, b: Tensor) -> None:
    if a.dtype != b.dtype:
        raise ArgumentTypeError(f"{fn}: operands have dtypes {a.dtype} and {b.dtype}; "
                                "convert one so they match")


def _broadcast(fn: str, a: tuple, b: tuple) -> tuple:
    if a == b:                             # (most operands: no NumPy call)
        return a
    try:
        shape = np.broadcast_shapes(a, b)
    except ValueError:
        raise ShapeError(f"{fn}: shapes {a} and {b} cannot be broadcast together "
                         "(NumPy rules: trailing dimensions must match or be 1)") from None
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{fn}: shapes {a} and {b} broadcast to {shape}; at most "
                         f"{MAX_RANK} dimensions are supported")
    return shape


def _sum_to(backend, g, shape: tuple):
    """Sum a broadcast gradient down to ``shape``."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    return backend.reshape(backend.reduce("sum", g, axes, keepdims=True), shape)


def _axes(fn: str, x: Tensor, axis) -> tuple:
    """Normalise ``axis`` (None, an int or a sequence of ints) to sorted non-negative axes. A
    0-d tensor takes axis 0 or -1, as in PyTorch: the scalar itself (no axis to reduce). An
    empty sequence is every axis, as PyTorch's dim=() (NumPy's axis=() is none)."""
    if axis is None or (isinstance(axis, (tuple, list)) and not axis):
        return tuple(range(x.ndim))
    rank = x.ndim or 1              # (max is the reduction here)
    items = (axis,) if isinstance(axis, (int, np.integer)) else axis
    try:
        items = tuple(items)
    except TypeError:
        raise bad_type(fn, "axis", axis, "None, an int or a tuple of ints") from None
    out = []
    for a in items:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise bad_type(fn, "axis", axis, "None, an int or a tuple of ints")
        if not -rank <= a < rank:
            raise bad_axis(fn, "axis", axis,
                           f"axes in [-{rank}, {rank}) for a tensor of shape {x.shape}")
        out.append(int(a) % rank)
    if len(set(out)) != len(out):
        raise bad_value(fn, "axis", axis, "each axis at most once")
    return tuple(sorted(out)) if x.ndim else ()


# ---------------------------------------------------------------------------------------------
# Elementwise ops

def _non_float(v) -> bool:
    """An int32 or bool tensor (a float16 or bfloat16 one is refused as an operand)."""
    return isinstance(v, Tensor) and not is_float(v.dtype) and v.dtype.kind in "biu"


# Unary ops PyTorch computes in float for integer input (its integer-to-float promotion): an
# int32 or bool tensor is converted to float32 first.
FLOAT_OF_INTEGERS = frozenset((
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
    "sigmoid", "tanh", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
    "acosh", "atanh", "erf", "erfc"))


def _unary(op: str, fn: str, x, a: float = 0.0, b: float = 0.0) -> Tensor:
    if _non_float(x):
        from . import logic                    # (integer ops build on this module)
        if op in logic.INTEGER_UNARY:
            return logic.integer_unary(op, x)
        if op in FLOAT_OF_INTEGERS:
            x = logic.to(x, DEFAULT_DTYPE)
    x = _tensor(fn, "x", x, low_precision=True)      # (the kernels take 16-bit storage)
    backend = device.active()
    if x.dtype.itemsize == 2 and autocast.keeps_float32(op):
        x = converted(backend, x, DEFAULT_DTYPE)
    hx = handle(backend, x)
    hy = backend.unary(op, hx, a, b)
    # Only what the rule reads is kept; in place of what it does not read it is handed
    # what it does (or g): the same shape, never read.
    reads = UNARY_GRAD_READS.get(op, "x")
    kept_x = hx if "x" in reads else None
    kept_y = hy if "y" in reads else None

    def backward(g, needs):
        x_ = kept_x if kept_x is not None else kept_y if kept_y is not None else g
        return (backend.unary_backward(op, x_, kept_y if kept_y is not None else x_, g,
                                       a, b),)
    return _make(hy, (x,), backward, backend)


def _public_unary(op: KernelOp):
    """``dg.<op.name>(x)``: the kernel op applied elementwise, its gradient the kernel's
    backward, with the registry's docstring."""
    def public(x) -> Tensor:
        return _unary(op.name, op.name, x)
    public.__name__ = public.__qualname__ = op.name
    public.__doc__ = op.doc
    return public              # (its kernel takes 16-bit storage: see low_precision.py)


# neg exp log sqrt abs relu gelu sigmoid tanh ... : every unary op public as it is.
PUBLIC_UNARY = tuple(op.name for op in UNARY if op.doc)
for _op in UNARY:
    if _op.doc:
        globals()[_op.name] = _public_unary(_op)


@computes_in_float32
def _clamp_by_tensors(x, lo, hi) -> Tensor:
    """clamp with a tensor bound (or two): selections, so exact in any type."""
    from . import logic                        # (it builds on this module)
    x = _tensor("clamp", "x", x)
    out = x if lo is None else logic.where(logic.lt(x, lo), lo, x)
    return out if hi is None else logic.where(logic.gt(out, hi), hi, out)


@computes_in_float32
def _round_decimals(x, scale: float) -> Tensor:
    """round(x * scale) / scale, in float32 for 16-bit x and rounded once, as PyTorch's."""
    x = _tensor("round", "x", x)
    return div(_unary("round", "round", mul(x, scale)), scale)


def _softplus_scaled(x, beta: float, threshold: float) -> Tensor:
    """softplus's composition for a beta or threshold of its own (16-bit x: in float32,
    rounded once)."""
    from . import logic                        # (it builds on this module)
    x = _tensor("softplus", "x", x)
    z = mul(x, beta)
    return logic.where(logic.gt(z, threshold), x, div(_unary("softplus", "softplus", z), beta))


_softplus_scaled.__name__ = "softplus"          # (autocast's float32 list names the op)
_softplus_scaled = computes_in_float32(_softplus_scaled)


def round(x, decimals: int = 0) -> Tensor:  # noqa: A001 - PyTorch's name
    """The nearest integer, halves to the even one (as torch.round), elementwise; with
    ``decimals``, round(x * 10**decimals) / 10**decimals, PyTorch's rule. Its gradient is
    0."""
    decimals = checks.integer("round", "decimals", decimals)
    if decimals == 0:
        return _unary("round", "round", x)
    return _round_decimals(x, 10.0 ** decimals)


def softplus(x, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + e**(beta x)) / beta, elementwise, and x itself where beta x > threshold, as
    PyTorch's Softplus (beta 1 and threshold 20: one kernel; else a composition of it)."""
    beta = checks.number("softplus", "beta", beta)
    threshold = checks.number("softplus", "threshold", threshold)
    if beta == 1.0 and threshold == 20.0:
        return _unary("softplus", "softplus", x)
    if beta == 0.0:
        raise InvalidValueError("softplus: argument 'beta' is 0.0; expected a nonzero number")
    return _softplus_scaled(x, beta, threshold)


def clamp(x, min=None, max=None) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """min(max(x, min), max), elementwise (either bound may be None): x limited to [min,
    max], or max everywhere when min > max, as PyTorch's clamp; NaN passes through. The
    gradient flows where min <= x <= max. A bound may be a tensor (broadcast with x), as
    PyTorch's: it takes the gradient where it is the result."""
    for name, bound in (("min", min), ("max", max)):
        if bound is not None and not is_number(bound) and not isinstance(bound, Tensor):
            raise bad_type("clamp", name, bound, "a number, a tensor or None")
    if min is None and max is None:
        raise InvalidValueError("clamp: at least one of 'min' and 'max' must be given")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return _clamp_by_tensors(x, min, max)
    lo = -math.inf if min is None else _number_as(x, float(min))
    hi = math.inf if max is None else _number_as(x, float(max))
    return _unary("clamp", "clamp", x, lo, hi)


def clip(x, min=None, max=None) -> Tensor:  # noqa: A002
    """``clamp``, under NumPy's and PyTorch's other name."""
    return clamp(x, min, max)


def numel(input) -> int:  # noqa: A002
    """The number of elements of a tensor, as ``torch.numel``."""
    if not isinstance(input, Tensor):
        raise bad_type("numel", "input", input, "a dualgrad Tensor")
    return math.prod(input.shape)


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a dualgrad Tensor (a Parameter too), as ``torch.is_tensor``."""
    return isinstance(obj, Tensor)


def hardtanh(x, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """x limited to [min_val, max_val], elementwise, as PyTorch's hardtanh: NaN passes
    through, and the gradient flows only strictly inside the bounds (``clamp``'s flows at
    them too)."""
    lo, hi = hardtanh_bounds("hardtanh", min_val, max_val)
    return _unary("hardtanh", "hardtanh", x, lo, hi)


def hardtanh_bounds(fn: str, min_val, max_val) -> tuple:
    """(min_val, max_val) as floats, checked: finite, min_val < max_val."""
    lo = checks.number(fn, "min_val", min_val)
    hi = checks.number(fn, "max_val", max_val)
    if lo >= hi:
        raise InvalidValueError(f"{fn}: argument 'min_val' ({lo}) must be less than "
                                f"'max_val' ({hi})")
    return lo, hi


def gelu(x, approximate: str = "none") -> Tensor:
    """x * Phi(x), elementwise, Phi the standard normal CDF, as PyTorch's GELU: exact (by
    erf) by default; ``approximate="tanh"`` gives 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
    x^3)))."""
    return _unary(gelu_op("gelu", approximate), "gelu", x)


def gelu_op(fn: str, approximate) -> str:
    """The kernel op of gelu's ``approximate`` argument."""
    kernels = {"none": "gelu", "tanh": "gelu_tanh"}
    if not isinstance(approximate, str) or approximate not in kernels:
        raise InvalidValueError(f"{fn}: argument 'approximate' must be 'none' or 'tanh', "
                                f"got {approximate!r}")
    return kernels[approximate]


def leaky_relu(x, negative_slope: float = 0.01) -> Tensor:
    """x where x > 0, else negative_slope * x, elementwise (PyTorch's leaky_relu)."""
    slope = checks.number("leaky_relu", "negative_slope", negative_slope)
    return _unary("leaky_relu", "leaky_relu", x, slope)


def elu(x, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (e**x - 1), elementwise (PyTorch's elu)."""
    return _unary("elu", "elu", x, checks.number("elu", "alpha", alpha))


def celu(x, alpha: float = 1.0) -> Tensor:
    """x where x > 0, else alpha * (e**(x / alpha) - 1), elementwise (PyTorch's celu);
    alpha must not be 0."""
    return _unary("celu", "celu", x, celu_alpha("celu", alpha))


def celu_alpha(fn: str, alpha) -> float:
    """celu's alpha as a float, checked: finite, not 0 (x is divided by it)."""
    value = checks.number(fn, "alpha", alpha)
    if value == 0.0:
        raise InvalidValueError(f"{fn}: argument 'alpha' must not be 0 (x is divided by it)")
    return value


def relu6(x) -> Tensor:
    """min(max(x, 0), 6), elementwise (``hardtanh(x, 0, 6)``, as PyTorch's relu6)."""
    return _unary("hardtanh", "relu6", x, 0.0, 6.0)


# How a binary op with one Python-number operand maps to a one-tensor op with a scalar
# parameter, so scalars never become device buffers: (op, tensor-on-left form,
# tensor-on-right form), each (unary op, scalar transform).
_SCALAR_FORMS = {
    "add": (("add_scalar", float), ("add_scalar", float)),
    "sub": (("add_scalar", lambda s: -float(s)), ("rsub_scalar", float)),
    "mul": (("mul_scalar", float), ("mul_scalar", float)),
    "div": (("div_scalar", float), ("rdiv_scalar", float)),
    "pow": (("pow_scalar", float), ("rpow_scalar", float)),
}


def _number_as(x, value: float) -> float:
    """A Python number beside tensor x as PyTorch takes it: rounded to x's type where that
    is float16 or bfloat16 (through float32, as c10's conversions go), so ``x + 1.001`` of
    a bfloat16 x adds 1.0. (The backends round it to float32 beside a float32 x.)"""
    dtype = getattr(x, "dtype", None)
    if dtype in LOW_PRECISION:
        with np.errstate(over="ignore"):         # (inf past float16's range, as PyTorch)
            return float(np.float32(value).astype(dtype))
    return value


# The dtypes a sum may mix (``_binary``)
_MIXED = [{DEFAULT_DTYPE, t} for t in LOW_PRECISION]


def _binary(op: str, fn: str, a, b) -> Tensor:
    if _non_float(a) or _non_float(b):
        from . import logic                    # (integer ops build on this module)
        promoted = logic.integer_binary(op, fn, a, b)
        if isinstance(promoted, Tensor):
            return promoted
        a, b = promoted
    a_number, b_number = is_number(a), is_number(b)
    if b_number and not a_number and op in _SCALAR_FORMS:
        form, transform = _SCALAR_FORMS[op][0]
        return _unary(form, fn, a, transform(_number_as(a, b)))
    if a_number and not b_number and op in _SCALAR_FORMS:
        form, transform = _SCALAR_FORMS[op][1]
        return _unary(form, fn, b, transform(_number_as(b, a)))
    names = ("input", "other") if op == "atan2" else ("a", "b")
    if a_number != b_number:                 # a number beside a tensor: a 0-d constant
        other = _tensor(fn, names[a_number], b if a_number else a)
        number = _constant((), float(a if a_number else b), other.dtype)
        a, b = (number, other) if a_number else (other, number)
    # The kernels take operands of one 16-bit type and one shape, and a sum or difference
    # of a float32 and a 16-bit operand of one shape (a residual under autocast: a float32
    # result, as the float32 op of the widened operand); the rest: low_precision.py.
    both = isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape
    low = both and a.dtype == b.dtype and not autocast.keeps_float32(op)
    mixed = both and op in ("add", "sub") and {a.dtype, b.dtype} in _MIXED
    a = _tensor(fn, names[0], a, b, low_precision=low or mixed)
    b = _tensor(fn, names[1], b, a, low_precision=low or mixed)
    if not mixed:
        _same_dtype(fn, a, b)
    _broadcast(fn, a.shape, b.shape)
    backend = device.active()
    ha, hb = handle(backend, a), handle(backend, b)
    hy = backend.binary(op, ha, hb)
    a_shape, b_shape, a_type, b_type = a.shape, b.shape, a.dtype, b.dtype
    saved = None if op in ("add", "sub") else (ha, hb)    # (a sum's rule reads neither)

    def backward(g, needs):
        if op == "add":
            ga, gb = g, g
        elif op == "sub":
            ga, gb = g, (backend.unary("neg", g) if needs[1] else None)
        else:
            ga, gb = backend.binary_backward(op, *saved, g)
        if mixed:                   # (each operand's gradient of its own type)
            ga, gb = (_grad_for(backend, h, t) if h is not None else None
                      for h, t in ((ga, a_type), (gb, b_type)))
        return (_sum_to(backend, ga, a_shape) if needs[0] else None,
                _sum_to(backend, gb, b_shape) if needs[1] else None)
    return _make(hy, (a, b), backward, backend)


@computes_in_float32
def add(a, b, *, alpha=1) -> Tensor:
    """a + b with NumPy broadcasting; either may be a number; ``alpha``: a + alpha b, as
    PyTorch's (alpha b rounded, then added)."""
    return _binary("add", "add", a, _scaled("add", b, alpha))


@computes_in_float32
def sub(a, b, *, alpha=1) -> Tensor:
    """a - b with NumPy broadcasting; either may be a number; ``alpha``: a - alpha b."""
    return _binary("sub", "sub", a, _scaled("sub", b, alpha))


def _scaled(fn: str, b, alpha):
    """b, or alpha b where alpha is not 1."""
    if alpha.__class__ is int and alpha == 1:       # (the default, checked cheaply)
        return b
    alpha = checks.number(fn, "alpha", alpha)
    if alpha == 1.0:
        return b
    return mul(b, alpha) if isinstance(b, Tensor) or not is_number(b) else b * alpha


@computes_in_float32
def mul(a, b) -> Tensor:
    """a * b with NumPy broadcasting; either may be a number."""
    return _binary("mul", "mul", a, b)


@computes_in_float32
def div(a, b) -> Tensor:
    """a / b with NumPy broadcasting; either may be a number."""
    return _binary("div", "div", a, b)


@computes_in_float32
def pow(a, b) -> Tensor:  # noqa: A001 - the public name mirrors NumPy's
    """a ** b with NumPy broadcasting; either may be a number. Follows C's pow: a negative
    base with a non-integer exponent gives NaN."""
    return _binary("pow", "pow", a, b)


@computes_in_float32
def atan2(input, other) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """The angle of the point (other, input) in [-pi, pi], elementwise with broadcasting, as
    ``torch.atan2`` (C's values at zeros and infinities; either may be a number)."""
    return _binary("atan2", "atan2", input, other)


@computes_in_float32
def maximum(a, b) -> Tensor:
    """Elementwise maximum; NaN from either side wins; at ties each side gets half the
    gradient (as PyTorch), a number for one side too."""
    return _min_or_max("maximum", a, b)


@computes_in_float32
def minimum(a, b) -> Tensor:
    """Elementwise minimum; NaN from either side wins; at ties each side gets half the
    gradient (as PyTorch), a number for one side too."""
    return _min_or_max("minimum", a, b)


@computes_in_float32
def lerp(input, end, weight) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """input + weight (end - input), as ``torch.lerp`` (broadcasting; ``weight`` a number or
    a tensor). For a number past 0.5 it is end - (1 - weight) (end - input), PyTorch's form,
    exact at weight 1."""
    start = _tensor("lerp", "input", input, end)
    end = _tensor("lerp", "end", end, start)
    diff = sub(end, start)
    if is_number(weight):
        w = float(weight)                       # (NaN gives NaN, as PyTorch's)
        return add(start, mul(diff, w)) if builtins.abs(w) < 0.5 else \
            sub(end, mul(diff, 1.0 - w))
    return add(start, mul(_tensor("lerp", "weight", weight, start), diff))


@computes_in_float32
def fmod(input, other) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """input - trunc(input / other) * other, as C's fmod and ``torch.fmod`` (the sign of
    ``input``; NaN where other is 0 or input infinite), exact; either may be a number. Its
    gradients are g and -g * trunc(input / other), the quotient exact (PyTorch's rounds
    input / other first: near an integer it may differ by one). Integer tensors become
    float (PyTorch keeps them integer)."""
    return _binary("fmod", "fmod", input, other)


def _min_or_max(op: str, a, b) -> Tensor:
    if _non_float(a) or _non_float(b):
        return _binary(op, op, a, b)
    if is_number(b) and not is_number(a):
        return _unary(op + "_scalar", op, a, float(b))
    if is_number(a) and not is_number(b):
        return _unary(op + "_scalar", op, b, float(a))
    return _binary(op, op, a, b)


# ---------------------------------------------------------------------------------------------
# Reductions and shape ops

def _reduce(op: str, x, axis, keepdims: bool) -> Tensor:
    x = _tensor(op, "x", x)
    axes = _axes(op, x, axis)
    checks.flag(op, "keepdims", keepdims)
    if op in ("max", "min") and any(x.shape[a] == 0 for a in axes):
        raise bad_shape(op, "x", x.shape, f"no zero-length axis among the reduced {axes}")
    backend = device.active()
    hx = handle(backend, x)
    hk = backend.reduce(op, hx, axes, keepdims=True)
    kshape = tuple(hk.shape)
    out_shape = kshape if keepdims else tuple(n for i, n in enumerate(x.shape)
                                              if i not in axes)
    hy = hk if keepdims else backend.reshape(hk, out_shape)
    if op == "sum":      # g read along the reduced axes again: nothing of x is kept
        x_shape, steps = x.shape, broadcast_strides(kshape, x.shape)

        def backward(g, needs):
            return (backend.strided(backend.reshape(g, kshape), x_shape, steps, 0),)
        return _make(hy, (x,), backward, backend)

    def backward(g, needs):
        return (backend.reduce_backward(op, hx, hk, backend.reshape(g, kshape), axes),)
    return _make(hy, (x,), backward, backend)


def _dim_or_axis(fn: str, axis, dim, keepdims, keepdim) -> tuple:
    """PyTorch's ``dim=``/``keepdim=`` as aliases of NumPy's ``axis=``/``keepdims=``."""
    if dim is not None:
        if axis is not None:
            raise ArgumentTypeError(f"{fn}: got both 'axis' and 'dim'; pass one of them")
        axis = dim
    if keepdim is not None:
        if keepdims is not None:
            raise ArgumentTypeError(f"{fn}: got both 'keepdims' and 'keepdim'; pass one of them")
        keepdims = keepdim
    return axis, False if keepdims is None else keepdims


@computes_in_float32
def sum(x, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (None: all axes; an int or a tuple of ints); ``dim`` and
    ``keepdim`` are accepted as PyTorch spells them. Of a bool or int32 tensor, an int32
    tensor (wrapping as int32 does; PyTorch's is int64), exact, with no gradient: e.g. the
    count of ``(pred == y).sum()``."""
    axis, keepdims = _dim_or_axis("sum", axis, dim, keepdims, keepdim)
    if _non_float(x):
        return _integer_reduce("sum", x, axis, keepdims)
    return _reduce("sum", x, axis, keepdims)


def _integer_reduce(op: str, x: Tensor, axis, keepdims: bool) -> Tensor:
    """sum, max or min of a bool or int32 tensor over ``axis`` (int32, a bool's max or min
    bool): the reduced axes, moved last where they are not already neighbours, read as
    (outer, n, inner)."""
    axes = _axes(op, x, axis)
    checks.flag(op, "keepdims", keepdims)
    if op != "sum" and any(x.shape[a] == 0 for a in axes):
        raise bad_shape(op, "x", x.shape, f"no zero-length axis among the reduced {axes}")
    backend = device.active()
    h = handle(backend, x)
    if x.dtype != INT32:
        h = backend.cast(h, INT32)
    shape = x.shape
    if not axes:                                # (a 0-d tensor: itself)
        outer, n, inner = x.size, 1, 1
    elif axes[-1] - axes[0] == len(axes) - 1:   # (neighbours: read in place)
        outer, n = math.prod(shape[:axes[0]]), math.prod(shape[axes[0]:axes[-1] + 1])
        inner = math.prod(shape[axes[-1] + 1:])
    else:
        kept = [d for d in range(x.ndim) if d not in axes]
        h = backend.permute(h, (*kept, *axes))
        outer, inner = math.prod(shape[d] for d in kept), 1
        n = math.prod(shape[d] for d in axes)
    out_shape = reduced_shape(shape, axes, keepdims)
    hy = backend.reshape(backend.int_reduce("int_" + op, h, outer, n, inner), out_shape)
    if op != "sum" and x.dtype != INT32:
        hy = backend.cast(hy, x.dtype)
    return adopt(backend, Tensor(out_shape, hy.dtype), hy)


@computes_in_float32
def mean(x, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:
    """Mean over ``axis`` (None: all axes); the mean of no elements is NaN. ``dim`` and
    ``keepdim`` are accepted as PyTorch spells them."""
    axis, keepdims = _dim_or_axis("mean", axis, dim, keepdims, keepdim)
    return _reduce("mean", x, axis, keepdims)


@computes_in_float32
def amax(x, axis=None, keepdims=None, *, dim=None, keepdim=None) -> Tensor:
    """Maximum over ``axis`` (None: all axes; an int or a tuple), as ``torch.amax``: the
    values alone; NaN propagates, and tied maxima share the gradient evenly. ``dim`` and
    ``keepdim`` are accepted as PyTorch spells them. Of an int32 (bool) tensor, an int32
    (bool) one."""
    axis, keepdims = _dim_or_axis("max", axis, dim, keepdims, keepdim)
    if _non_float(x):
        return _integer_reduce("max", x, axis, keepdims)
    return _reduce("max", x, axis, keepdims)


@computes_in_float32
def reshape(x, *shape) -> Tensor:
    """The same elements with another shape; one dimension may be -1 (inferred)."""
    x = _tensor("reshape", "x", x, any_dtype=True, low_precision=True)    # (a view)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if not builtins.all(isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                        for n in shape):
        raise bad_type("reshape", "shape", shape, "a tuple of ints")
    shape = tuple(int(n) for n in shape)
    unknown = [i for i, n in enumerate(shape) if n == -1]
    if len(unknown) > 1 or builtins.any(n < -1 for n in shape):
        raise bad_value("reshape", "shape", shape,
                        "non-negative sizes with at most one -1")
    known = math.prod(n for n in shape if n != -1)
    if unknown:
        if known == 0 or x.size % known:
            raise bad_value("reshape", "shape", shape,
                            f"a shape with {x.size} elements (the input's {x.shape})")
        shape = tuple(x.size // known if n == -1 else n for n in shape)
    if math.prod(shape) != x.size:
        raise bad_value("reshape", "shape", shape,
                        f"a shape with {x.size} elements (the input's {x.shape})")
    if len(shape) > MAX_RANK:
        raise bad_value("reshape", "shape", shape, f"at most {MAX_RANK} dimensions")
    backend = device.active()
    hy = backend.reshape(handle(backend, x), shape)
    x_shape = x.shape

    def backward(g, needs):
        return (backend.reshape(g, x_shape),)
    return _make(hy, (x,), backward, backend, dtype=x.dtype)


@computes_in_float32
def transpose(x, axes=None) -> Tensor:
    """The tensor with its axes permuted (default: reversed, so a matrix is transposed)."""
    x = _tensor("transpose", "x", x, any_dtype=True)
    if axes is None:
        axes = tuple(range(x.ndim))[::-1]
    try:
        axes = tuple(axes)
    except TypeError:
        raise bad_type("transpose", "axes", axes, "a permutation of the axes") from None
    if not builtins.all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                        for a in axes):
        raise bad_type("transpose", "axes", axes, "a permutation of the axes (ints)")
    if builtins.any(not -x.ndim <= a < x.ndim for a in axes):
        raise bad_axis("transpose", "axes", axes,
                       f"axes in [-{x.ndim}, {x.ndim}) for shape {x.shape}")
    axes = tuple(int(a) % x.ndim for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise bad_value("transpose", "axes", axes,
                        f"a permutation of range({x.ndim}) for shape {x.shape}")
    backend = device.active()
    hy = backend.permute(handle(backend, x), axes)
    inverse = tuple(int(i) for i in np.argsort(axes))

    def backward(g, needs):
        return (backend.permute(g, inverse),)
    return _make(hy, (x,), backward, backend, dtype=x.dtype)


# ---------------------------------------------------------------------------------------------
# Matrix products

def _check_matmul(fn: str, a: Tensor, b: Tensor, a_inner: int, b_inner: int) -> None:
    for name, t in (("a", a), ("b", b)):
        if t.ndim not in (2, 3):
            raise bad_shape(fn, name, t.shape, "a 2-D matrix or a 3-D batch of matrices")
    if a.shape[a_inner] != b.shape[b_inner]:
        raise ShapeError(f"{fn}: inner dimensions differ: a has shape {a.shape} and b has "
                         f"shape {b.shape}")
    if a.ndim == 3 and b.ndim == 3 and a.shape[0] != b.shape[0]:
        raise ShapeError(f"{fn}: batch sizes differ: a has shape {a.shape} and b has "
                         f"shape {b.shape}")


def product_type(tensors):
    """The 16-bit type a product of these float tensors is made in, or None: under
    ``autocast``, its type where each is float32 or 16-bit (one of the other 16-bit type is
    converted to it, as PyTorch's autocast casts it); else their type where all are of one
    16-bit type."""
    low = autocast.active()
    if low is not None and all(t.dtype == DEFAULT_DTYPE or t.dtype.itemsize == 2
                               for t in tensors):
        return low
    first = tensors[0].dtype
    if first in LOW_PRECISION and all(t.dtype == first for t in tensors):
        return first
    return None


def _product_operands(fn: str, named: tuple) -> tuple:
    """(tensors, low) of a product's float arguments ``named`` ((name, value), ..., the
    first two its operands; None values skipped): ``low``, product_type's. Where it is
    None, a 16-bit tensor raises ``LowPrecisionInput`` (computes_in_float32 widens it:
    PyTorch's promotion) and the rest must share one dtype."""
    first = named[0][1]
    tensors = []
    for i, (name, value) in enumerate(named):
        like = named[1][1] if i == 0 else first
        tensors.append(None if value is None else
                       _tensor(fn, name, value, like if isinstance(like, Tensor) else None,
                               low_precision=True))
        if i == 0:
            first = tensors[0]
    given = [t for t in tensors if t is not None]
    low = product_type(given)
    if low is not None and any(t.dtype.itemsize == 2 and t.dtype != low for t in given):
        backend = device.active()          # (autocast: the other 16-bit type converted)
        tensors = [t if t is None or t.dtype.itemsize != 2 or t.dtype == low else
                   converted(backend, t, low) for t in tensors]
    if low is None:
        for (name, _), t in zip(named, tensors):
            if t is not None:
                refuse_low_precision(fn, name, t)
                _same_dtype(fn, given[0], t)
    return tensors, low


def _wide(backend, h):
    """Storage as float32 kernels read it: a 16-bit one widened (exact; a product made in
    its type takes it as it is: ``Backend.matmul``)."""
    return backend.cast(h, DEFAULT_DTYPE) if h.dtype.itemsize == 2 else h


def _kept(backend, t: Tensor, h, low):
    """What a product made in ``low`` keeps of its operand ``t`` (storage ``h``) for its
    backward pass: a float32 activation (an op's result, on the tape) rounded to ``low``,
    half its bytes, as PyTorch's autocast keeps the 16-bit copy it multiplies; anything
    else (a parameter, a 16-bit tensor) as it is."""
    if low is not None and t._node is not None and t.dtype == DEFAULT_DTYPE and \
            tape.recording():
        return backend.cast(h, low)
    return h


def _grad_for(backend, h, dtype):
    """A product's float32 gradient ``h`` for an input of ``dtype``, in that dtype (a
    16-bit input's gradient is 16-bit, rounded once; one the product stored so, as it
    is). (Rules keep their inputs' dtypes and shapes, not the tensors: a tensor held by a
    rule would hold its storage too.)"""
    return backend.cast(h, dtype) if dtype.itemsize == 2 and h.dtype != dtype else h


def _stored_as(dtype, low):
    """The ``result`` type a product in ``low`` gives an input's gradient: the input's own
    16-bit type (rounded once as it is stored, the same bits as a conversion after), else
    float32 (None)."""
    return dtype if dtype.itemsize == 2 and dtype == low else None


def _into(need, dtype):
    """tape.into(need) where the product's float32 (or float64) gradient for an input of
    ``dtype`` may be written into its gradient storage (not a 16-bit one)."""
    return tape.into(need) if dtype.itemsize != 2 else None


def _low_result(y: Tensor, low) -> Tensor:
    """An op's float32 result made of products in the 16-bit type ``low``, rounded to it
    once (PyTorch's autocast: the activations after a product are 16-bit), recorded.
    (matmul and linear store theirs rounded: ``Backend.matmul``'s ``result``.)"""
    return y if low is None else converted(device.active(), y, low)


@computes_in_float32
def matmul(a, b) -> Tensor:
    """Matrix product a @ b with ``torch.matmul``'s rules: a 1-D operand is a vector (a row
    on the left, a column on the right, its axis dropped from the result); operands of
    more than two axes are stacks of matrices whose leading (batch) axes broadcast, and a
    2-D operand is shared by the whole stack. Full float32 arithmetic on both backends.
    Operands of one 16-bit type, or float32 ones under ``autocast``, are multiplied as they
    are in that type with float32 accumulation, and the product is rounded to it once."""
    (a, b), low = _product_operands("matmul", (("a", a), ("b", b)))
    for name, t in (("a", a), ("b", b)):
        if t.ndim == 0:
            raise bad_shape("matmul", name, t.shape, "at least 1 dimension")
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else -1]:
        raise ShapeError(f"matmul: inner dimensions differ: a has shape {a.shape} and b has "
                         f"shape {b.shape}")
    if a.ndim in (2, 3) and b.ndim in (2, 3) and (a.ndim == 2 or b.ndim == 2 or
                                                  a.shape[0] == b.shape[0]):
        return product(a, b, low, rounded=True)         # what the kernels take as it is
    return _stacked_product(a, b, low)


def _stacked_product(a: Tensor, b: Tensor, low) -> Tensor:
    """matmul of vectors or stacks (checked operands): reshaped into what the kernels take
    (a 2-D matrix or one stack of matrices, a 2-D operand shared), multiplied once, and
    reshaped back; the batch axes broadcast (``expand``), so their gradients sum back."""
    from .indexing import expand
    a2 = reshape(a, (1,) + a.shape) if a.ndim == 1 else a
    b2 = reshape(b, b.shape + (1,)) if b.ndim == 1 else b
    (m, k), n = a2.shape[-2:], b2.shape[-1]
    if b2.ndim == 2:                        # every row of the stack times one matrix
        batch = a2.shape[:-2]
        y = product(reshape(a2, (math.prod(batch) * m, k)), b2, low, rounded=True)
    elif a2.ndim == 2:                      # one matrix times each of the stack
        batch = b2.shape[:-2]
        y = product(a2, reshape(b2, (math.prod(batch), k, n)), low, rounded=True)
    else:
        try:
            batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        except ValueError:
            raise ShapeError(f"matmul: batch sizes differ: a has shape {a.shape} and b has "
                             f"shape {b.shape}, whose leading axes do not broadcast "
                             "together") from None
        stacked = []
        for t in (a2, b2):
            if t.shape[:-2] != batch:
                t = expand(t, batch + t.shape[-2:])
            stacked.append(reshape(t, (math.prod(batch),) + t.shape[-2:]))
        y = product(stacked[0], stacked[1], low, rounded=True)
    y = reshape(y, tuple(batch) + (m, n))
    if a.ndim == 1:
        y = reshape(y, y.shape[:-2] + y.shape[-1:])
    if b.ndim == 1:
        y = reshape(y, y.shape[:-1])
    return y


def product(a: Tensor, b: Tensor, low, rounded: bool = False) -> Tensor:
    """a @ b of checked operands, however they are stored: made in the 16-bit type ``low``
    where given (their values rounded to it, float32 accumulation), the result float32
    (the caller's op rounds its own result once) or, ``rounded``, rounded to ``low``."""
    backend = device.active()
    ha, hb = handle(backend, a), handle(backend, b)
    # (16-bit storage as it is; a 16-bit result hands the rule a 16-bit g, taken so too)
    hy = backend.matmul(ha, hb, low=low, result=low if rounded else None)
    ka, kb = _kept(backend, a, ha, low), _kept(backend, b, hb, low)
    a_shape, a_type, b_ndim, b_type = a.shape, a.dtype, b.ndim, b.dtype

    def backward(g, needs):
        ga = gb = None
        if needs[0]:
            if len(a_shape) == 2 and len(g.shape) == 3:   # a shared by the batch: summed
                ga = backend.reduce("sum", backend.matmul(g, kb, False, True, low=low), (0,),
                                    out=_into(needs[0], a_type))
            else:
                ga = backend.matmul(g, kb, False, True, out=_into(needs[0], a_type), low=low,
                                    result=_stored_as(a_type, low))
            ga = _grad_for(backend, ga, a_type)
        if needs[1]:
            into = _into(needs[1], b_type)
            if len(a_shape) == 3 and b_ndim == 2:     # b shared by the batch: one product
                m = a_shape[0] * a_shape[1]
                gb = backend.matmul(backend.reshape(ka, (m, a_shape[2])),
                                    backend.reshape(g, (m, g.shape[-1])), True, False,
                                    out=into, low=low)
            else:
                gb = backend.matmul(ka, g, True, False, out=into, low=low,
                                    result=_stored_as(b_type, low))
            gb = _grad_for(backend, gb, b_type)
        return ga, gb
    return _make(hy, (a, b), backward, backend)


class ThroughRelu:
    """What a linear layer made with its ReLU owes its output's gradient: the gradient
    through that relu, kept where the output is > 0, else 0 (relu's backward from its
    output, a projection). A product that consumes the output applies it as it stores
    (matmul's mask epilogue) and returns its gradient ``tape.Settled``."""

    __slots__ = ("mask",)

    def __init__(self, mask):
        self.mask = mask

    def apply(self, backend, g):
        return backend.unary_backward("relu", self.mask, self.mask, g)


def _relu_mask(t: Tensor):
    """The storage a gradient for ``t`` may be masked by as a product stores it: t's own,
    where t is a linear layer's output made with its ReLU; else None."""
    owed = tape.owed(t)      # (a 16-bit mask the tape applies itself: the kernel's is float)
    return owed.mask if owed.__class__ is ThroughRelu and t.dtype.itemsize != 2 else None


@computes_in_float32
def linear(x, weight, bias=None, activation=None) -> Tensor:
    """x @ weight.T + bias, with weight of shape (out, in) as in PyTorch; x is 2-D or 3-D.
    The transposed weight is read in place, never copied. ``activation="relu"``: relu of
    that, the same values as ``relu(linear(...))`` with the relu made as the product is
    stored (one kernel, not two)."""
    if activation not in (None, "relu"):
        raise bad_value("linear", "activation", activation, 'None or "relu"')
    relu = activation == "relu"
    (x, weight, bias), low = _product_operands("linear", (("x", x), ("weight", weight),
                                                          ("bias", bias)))
    if x.ndim not in (2, 3):
        raise bad_shape("linear", "x", x.shape, "2-D (batch, in) or 3-D (batch, seq, in)")
    if weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
        raise bad_shape("linear", "weight", weight.shape,
                        f"(out, {x.shape[-1]}) to match x of shape {x.shape}")
    inputs = (x, weight)
    if bias is not None:
        if bias.shape != (weight.shape[0],):
            raise bad_shape("linear", "bias", bias.shape, f"({weight.shape[0]},)")
        inputs += (bias,)
    backend = device.active()
    hx, hw = handle(backend, x), handle(backend, weight)
    hb = handle(backend, bias) if bias is not None else None
    hy = backend.matmul(hx, hw, False, True,
                        epilogue=Epilogue(bias=None if hb is None else _wide(backend, hb),
                                          relu=relu), low=low,   # (the bias: in float32)
                        result=low)
    kx, kw = _kept(backend, x, hx, low), _kept(backend, weight, hw, low)
    rows, width, outs = x.size // x.shape[-1], x.shape[-1], weight.shape[0]
    x_type, w_type = x.dtype, weight.dtype
    b_type = bias.dtype if bias is not None else None
    mask = _relu_mask(x)    # x made with a relu: its gradient through it, as it is stored

    def backward(g, needs):         # (g: through the relu, which the tape takes care of)
        g2 = backend.reshape(g, (rows, outs))
        gx = None
        if needs[0]:
            gx = backend.matmul(g, kw, epilogue=Epilogue(mask=mask)
                                if mask is not None else PLAIN, low=low,
                                result=_stored_as(x_type, low) if mask is None else None)
            gx = tape.Settled(gx) if mask is not None else _grad_for(backend, gx, x_type)
        gw = gb = None
        if b_type is not None and needs[2]:     # the sums of g's columns: with gw where it
            gb = _into(needs[2], b_type)        # is made, else alone
            if not needs[1]:
                gb = backend.reduce("sum", _wide(backend, g2), (0,), out=gb)
            elif gb is None:                    # (the row sums: float32, or float64)
                gb = backend.empty((outs,), DEFAULT_DTYPE if g.dtype.itemsize == 2
                                   else g.dtype)
        if needs[1]:
            gw = backend.matmul(g2, backend.reshape(kx, (rows, width)),
                                True, False, out=_into(needs[1], w_type),
                                epilogue=Epilogue(row_sums=gb) if gb is not None else PLAIN,
                                low=low)
            gw = _grad_for(backend, gw, w_type)
        if gb is not None:
            gb = _grad_for(backend, gb, b_type)
        return (gx, gw) if b_type is None else (gx, gw, gb)
    # (the ReLU's mask: the result's storage; a 16-bit one the tape applies itself)
    return _make(hy, inputs, backward, backend, ThroughRelu(hy) if relu else None)


# ---------------------------------------------------------------------------------------------
# Softmax family and losses

def _last_axis_op(fn: str, kernel: str, x, axis) -> Tensor:
    x = _tensor(fn, "x", x)
    if x.ndim == 0:              # a row of one, as PyTorch takes a 0-d tensor
        _axes(fn, x, axis)
        return reshape(_last_axis_op(fn, kernel, reshape(x, (1,)), -1), ())
    (axis,) = _axes(fn, x, axis)
    if axis != x.ndim - 1:       # move the axis last, apply, move it back
        order = tuple(i for i in range(x.ndim) if i != axis) + (axis,)
        inverse = tuple(int(i) for i in np.argsort(order))
        return transpose(_last_axis_op(fn, kernel, transpose(x, order), -1), inverse)
    backend = device.active()
    hy = getattr(backend, kernel)(handle(backend, x))
    grad_kernel = getattr(backend, kernel + "_backward")

    def backward(g, needs):
        return (grad_kernel(hy, g),)
    return _make(hy, (x,), backward, backend)


@computes_in_float32
def softmax(x, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``axis`` (``dim`` in PyTorch's spelling; default -1)."""
    axis, _ = _dim_or_axis("softmax", axis, dim, None, None)
    return _last_axis_op("softmax", "softmax", x, -1 if axis is None else axis)


@computes_in_float32
def log_softmax(x, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """x - logsumexp(x) along ``axis`` (``dim`` in PyTorch's spelling; default -1)."""
    axis, _ = _dim_or_axis("log_softmax", axis, dim, None, None)
    return _last_axis_op("log_softmax", "log_softmax", x, -1 if axis is None else axis)


def class_indices(fn: str, name: str, value, count: int, bound: int,
                  ignore: int | None = None) -> np.ndarray:
    """Validated integer indices in [0, bound) (or equal to ``ignore``, an ignored target,
    where given): an integer array (or list, or int32 tensor: its values are read to the
    host, to be checked) of ``count`` entries when count is not None."""
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iu":
            raise bad_type(fn, name, value, "integer indices (a NumPy array or an int32 "
                           f"tensor), not a {value.dtype} tensor")
        value = value.numpy()
    array = checks.array(fn, name, value, "iu", "integer indices (e.g. int64)")
    if count is not None and array.shape != (count,):
        raise bad_shape(fn, name, array.shape, f"({count},): one index per row")
    if array.size and (array.min() < 0 or array.max() >= bound):
        bad = (array < 0) | (array >= bound)
        if ignore is not None:
            bad &= array != ignore
        if bad.any():
            also = "" if ignore is None else f" or ignore_index ({ignore})"
            raise IndexOutOfRange(f"{fn}: argument '{name}' holds index "
                                  f"{int(array[bad].reshape(-1)[0])}; expected indices in "
                                  f"[0, {bound}){also}")
    # A recorded step replayed with new indices checks them the same way first.
    capture.check_input(value, lambda new: class_indices(fn, name, new, count, bound, ignore))
    return array


# ---------------------------------------------------------------------------------------------
# Selection

NO_SKIP = -2 ** 31          # a gather's skip value that no index takes (they are >= 0)


def gather_rows(x: Tensor, hidx, skip: int = NO_SKIP) -> Tensor:
    """x (rows, cols) gathered along its rows by device indices ``hidx`` (rows, k), an
    index equal to ``skip`` giving 0 (and no gradient). The losses' building block."""
    backend = device.active()
    hx = handle(backend, x)
    hy = backend.gather(hx, hidx, skip)
    cols = x.shape[1]

    def backward(g, needs):
        return (backend.gather_backward(hidx, g, cols, skip),)
    return _make(hy, (x,), backward, backend)


def _index_rows(fn: str, x: Tensor, dim, index) -> tuple:
    """For an op along ``dim`` of x at ``index`` (checked: x's rank, at most x's sizes but
    along dim): (dim, the axes with dim moved last, rows, k, cols, the device indices
    (rows, k), the index's shape with dim moved last, x cropped to the index's sizes but
    along dim, as PyTorch reads it)."""
    if x.ndim == 0:
        raise bad_shape(fn, "x", x.shape, "at least one dimension")
    dim = checks.integer(fn, "dim", dim)
    if not -x.ndim <= dim < x.ndim:
        raise bad_axis(fn, "dim", dim, f"a dimension in [-{x.ndim}, {x.ndim}) of shape "
                                       f"{x.shape}")
    dim %= x.ndim
    idx = class_indices(fn, "index", index, None, x.shape[dim])
    if idx.ndim != x.ndim or builtins.any(idx.shape[d] > x.shape[d]
                                          for d in range(x.ndim) if d != dim):
        raise bad_shape(fn, "index", idx.shape,
                        f"x's rank, and at most x's sizes {x.shape} but along dim {dim}")
    if builtins.any(idx.shape[d] < x.shape[d] for d in range(x.ndim) if d != dim):
        x = x[tuple(slice(None) if d == dim else slice(0, idx.shape[d])
                    for d in range(x.ndim))]
    backend = device.active()
    order = [d for d in range(x.ndim) if d != dim] + [dim]
    rows, k, cols = int(np.prod([x.shape[d] for d in order[:-1]])), idx.shape[dim], x.shape[dim]
    # (along the last axis the indices go to the device as they are: a captured step's
    # argument stays one)
    moved = idx if dim == x.ndim - 1 else np.ascontiguousarray(np.transpose(idx, order))
    return dim, order, rows, k, cols, backend.reshape(backend.indices(moved), (rows, k)), \
        moved.shape, x


def _moved_back(t: Tensor, order: list) -> Tensor:
    """t (with x's dim moved last by ``order``) in x's axis order."""
    if order == sorted(order):
        return t
    return transpose(t, tuple(int(i) for i in np.argsort(order)))


@computes_in_float32
def gather(x, dim: int, index) -> Tensor:
    """Values of ``x`` along ``dim`` at ``index``, as ``torch.gather``: for dim 1 of a
    matrix, out[i, j] = x[i, index[i, j]]. ``index`` is an integer array (or int32 tensor)
    of x's rank whose other dimensions are at most x's; x of any dtype (bool, int32 too).
    The gradient is added back where each element came from (repeats accumulate)."""
    x = _tensor("gather", "x", x, any_dtype=True)
    dim, order, rows, k, cols, hidx, moved, x = _index_rows("gather", x, dim, index)
    rows_first = x if dim == x.ndim - 1 else transpose(x, order)
    out = gather_rows(reshape(rows_first, (rows, cols)), hidx)
    return _moved_back(reshape(out, moved), order)


@computes_in_float32
def scatter_add(input, dim: int, index, src) -> Tensor:  # noqa: A002 - PyTorch's names
    """``input`` with ``src`` added at ``index`` along ``dim``, as ``torch.scatter_add``: for
    dim 1 of a matrix, out[i, index[i, j]] += src[i, j]. ``index`` (an integer array or
    int32 tensor) has input's rank, and sizes at most src's, and at most input's but along
    dim (only src's elements within the index's shape are read, as PyTorch's). The values
    landing on one element are summed in index order first, then added to input (the same
    bits on both backends; PyTorch adds them to input one by one). Gradients: input's is
    g, src's is g gathered at index."""
    fn = "scatter_add"
    x = _tensor(fn, "input", input)
    src = _tensor(fn, "src", src, x)
    _same_dtype(fn, x, src)
    dim, order, rows, k, cols, hidx, moved, region = _index_rows(fn, x, dim, index)
    wanted = tuple(moved[i] for i in np.argsort(order))
    if src.ndim != x.ndim or builtins.any(a < b for a, b in zip(src.shape, wanted)):
        raise bad_shape(fn, "src", src.shape, f"input's rank and at least the index's sizes "
                                              f"{wanted}")
    if src.shape != wanted:
        src = src[tuple(slice(0, n) for n in wanted)]
    flat = reshape(src if dim == x.ndim - 1 else transpose(src, order), (rows, k))
    backend = device.active()
    hy = backend.gather_backward(hidx, handle(backend, flat), cols, NO_SKIP)

    def backward(g, needs):
        return (backend.gather(g, hidx, NO_SKIP),)
    added = _make(hy, (flat,), backward, backend)
    added = _moved_back(reshape(added, tuple(region.shape[d] for d in order)), order)
    if region.shape != x.shape:                  # zeros past the index's sizes
        from .indexing import pad
        added = pad(added, tuple(w for d in reversed(range(x.ndim))
                                 for w in (0, x.shape[d] - region.shape[d])))
    return add(x, added)


# ---------------------------------------------------------------------------------------------
# Layer kernels

@in_input_type
@computes_in_float32
def layer_norm(x, weight, bias=None, eps: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance);
    no shift where ``bias`` is None."""
    x = _tensor("layer_norm", "x", x, weight)
    weight = _tensor("layer_norm", "weight", weight, x)
    params = (weight,) if bias is None else (weight, _tensor("layer_norm", "bias", bias, x))
    if x.ndim == 0:
        raise bad_shape("layer_norm", "x", x.shape, "at least one dimension")
    for name, t in zip(("weight", "bias"), params):
        _same_dtype("layer_norm", x, t)
        if t.shape != (x.shape[-1],):
            raise bad_shape("layer_norm", name, t.shape, f"({x.shape[-1]},) to match x")
    eps = checks.number("layer_norm", "eps", eps, 0.0, lo_open=True)
    backend = device.active()
    hx, hw = handle(backend, x), handle(backend, weight)
    hb = handle(backend, params[1]) if bias is not None else None
    hy, hmean, hrstd = backend.layer_norm(hx, hw, hb, eps)

    def backward(g, needs):
        # (the parameters' sums written into a leaf's first .grad where they may be)
        into = [_into(need, t.dtype) for need, t in zip(needs[1:], params)] + [None]
        grads = backend.layer_norm_backward(hx, hw, hmean, hrstd, g, tuple(into[:2]))
        return tuple(d if need else None for d, need in zip(grads, needs))
    return _make(hy, (x, *params), backward, backend)


@computes_in_float32
def embedding(table, indices) -> Tensor:
    """Rows of ``table`` (num, dim) looked up by integer ``indices`` (any shape up to 3-D):
    the result has shape indices.shape + (dim,)."""
    table = _tensor("embedding", "table", table)
    if table.ndim != 2:
        raise bad_shape("embedding", "table", table.shape, "2-D (num_embeddings, dim)")
    idx = class_indices("embedding", "indices", indices, None, table.shape[0])
    if idx.ndim > MAX_RANK - 1:
        raise bad_shape("embedding", "indices", idx.shape, f"at most {MAX_RANK - 1} dims")
    backend = device.active()
    hi = backend.indices(idx)
    hy = backend.embedding(handle(backend, table), hi)

    def backward(g, needs):
        return (backend.embedding_backward(hi, g, table.shape[0],
                                           _into(needs[0], table.dtype)),)
    return _make(hy, (table,), backward, backend)


class _Draws(threading.local):
    """The (seed, step) of the dropout masks a checkpointed function draws: logged as it
    runs, then given back in order as it is recomputed, so the recomputation drops the
    same elements."""
    log = None            # a list the draws are appended to
    replay = None         # a list the draws are taken from

    def take(self, seed: int, step: int) -> tuple:
        if self.replay:
            return self.replay.pop(0)
        if self.log is not None:
            self.log.append((seed, step))
        return seed, step


_draws = _Draws()


def recomputing() -> bool:
    """Whether a checkpointed function is being computed again (its dropout draws are
    the first run's: a module must neither count a new draw nor schedule one)."""
    return _draws.replay is not None


@computes_in_float32
def dropout(x, p: float, seed: int, step: int) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p). The mask is a
    function of (seed, step, element index) alone (Philox), so both backends draw the same
    one and backward regenerates it."""
    x = _tensor("dropout", "x", x)
    p = checks.number("dropout", "p", p, 0.0, 1.0)
    seed = checks.integer("dropout", "seed", seed, 0, 2 ** 64)
    step = checks.integer("dropout", "step", step, 0, 2 ** 64)
    if p == 0.0:
        return x
    seed, step = _draws.take(seed, step)
    backend = device.active()
    hy = backend.dropout(handle(backend, x), float(p), int(seed), int(step))

    def backward(g, needs):
        return (backend.dropout(g, float(p), int(seed), int(step)),)
    return _make(hy, (x,), backward, backend)


# ---------------------------------------------------------------------------------------------
# Tensor operators and methods

def _reduction_method(op, dim_first: bool = False):
    """``Tensor.<op>``: the reduction as a method, also reached by ``np.sum(t)``,
    ``np.mean(t)`` and ``np.max(t)`` (which pass ``dtype=`` and ``out=``). ``dim_first``:
    op's positional arguments are PyTorch's ``dim, keepdim`` (max and min, whose results
    depend on the spelling), else NumPy's ``axis, keepdims``."""
    def numpy_arguments(self, dtype, out, numpy_kwargs) -> Tensor:
        """self, converted to ``dtype`` first where one is given (PyTorch's ``dtype=``)."""
        name = f"Tensor.{op.__name__}"
        if out is not None:
            raise bad_value(name, "out", out, "None (results are new tensors)")
        if numpy_kwargs:
            raise ArgumentTypeError(f"{name}: unexpected arguments {sorted(numpy_kwargs)}")
        if dtype is None:
            return self
        from .logic import to                  # (logic builds on this module)
        return to(self, resolve_dtype(name, dtype))

    def method(self, axis=None, keepdims=None, *, dim=None, keepdim=None, dtype=None,
               out=None, **numpy_kwargs):
        self = numpy_arguments(self, dtype, out, numpy_kwargs)
        return op(self, axis, keepdims, dim=dim, keepdim=keepdim)

    def dim_method(self, dim=None, keepdim=None, *, axis=None, keepdims=None, dtype=None,
                   out=None, **numpy_kwargs):
        self = numpy_arguments(self, dtype, out, numpy_kwargs)
        return op(self, dim, keepdim, axis=axis, keepdims=keepdims)
    chosen = dim_method if dim_first else method
    chosen.__name__ = op.__name__
    chosen.__qualname__ = f"Tensor.{op.__name__}"
    chosen.__doc__ = op.__doc__
    return chosen


def _named(name: str, fn):
    fn.__name__ = name
    fn.__qualname__ = f"Tensor.{name}"
    return fn


def _install_operators() -> None:
    """Python's operators and the method forms of ops, on Tensor (defined here because the
    ops are)."""
    T = Tensor
    binary = {"add": add, "sub": sub, "mul": mul, "truediv": div, "pow": pow,
              "matmul": matmul}
    for name, op in binary.items():
        setattr(T, f"__{name}__", _named(f"__{name}__", lambda a, b, op=op: op(a, b)))
        setattr(T, f"__r{name}__", _named(f"__r{name}__", lambda a, b, op=op: op(b, a)))
    T.__neg__ = _named("__neg__", lambda a: neg(a))
    T.T = property(lambda a: transpose(a), doc="The tensor with its axes reversed.")
    for op in (sum, mean, amax):
        setattr(T, op.__name__, _reduction_method(op))
    T.reshape = _named("reshape", lambda a, *shape: reshape(a, *shape))


_install_operators()

__all__ = ["matmul", "add", "sub", "mul", "div", "pow", *PUBLIC_UNARY, "gelu", "leaky_relu",
           "elu", "celu", "clamp", "clip", "numel", "is_tensor", "hardtanh",
           "relu6", "maximum", "lerp", "atan2", "fmod",
           "minimum", "sum", "mean", "amax", "reshape", "transpose", "softmax", "log_softmax",
           "gather", "scatter_add", "linear", "layer_norm", "embedding", "dropout"]
