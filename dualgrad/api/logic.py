"""Boolean and integer tensors' ops: comparisons (``== != < <= > >=``, as boolean tensors),
``isnan isinf isfinite``, logical ops (``& | ^ ~`` on bools), ``where``, ``masked_fill``,
``any``/``all`` and dtype conversion (``Tensor.to``, ``.float() .int() .bool()``).

Bools are stored a byte each (0 or 1) on both backends, as PyTorch's, and integer
tensors are int32 (PyTorch's default is int64). Operands of different dtypes are
promoted as PyTorch does: bool < int32 < float; a Python number takes the tensor's kind
(a float number beside an integer tensor makes the comparison a float one).
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentTypeError, IndexOutOfRange, ShapeError, bad_type, bad_value
from ..shapes import MAX_RANK
from . import checks, device, ops, tape
from .low_precision import computes_in_float32, converted, refuse_low_precision
from .ops import _axes, _broadcast, _constant, _dim_or_axis, _make, _sum_to
from .residency import adopt, handle
from .tensor import (BOOL, DEFAULT_DTYPE, INT32, LOW_PRECISION, Tensor, ag_tensor,
                     host_array, is_float, is_floating)
from .tensor import resolve_dtype

_RANK = {BOOL: 0, INT32: 1}            # floats rank 2


def _rank(dtype) -> int:
    return _RANK.get(dtype, 2)


def _operand(fn: str, name: str, x, like=None) -> Tensor:
    """A Tensor argument of any dtype; a NumPy array becomes a tensor of its kind (bool,
    int32 or float32), a number a 0-d constant of ``like``'s kind where it fits it."""
    if isinstance(x, Tensor):
        refuse_low_precision(fn, name, x)
        return x
    if checks.is_number(x) or isinstance(x, (bool, np.bool_)):
        if isinstance(x, (bool, np.bool_)):
            dtype = BOOL
        elif isinstance(x, (int, np.integer)):
            dtype = like.dtype if isinstance(like, Tensor) and like.dtype != BOOL else INT32
        else:
            dtype = like.dtype if isinstance(like, Tensor) and is_float(like.dtype) \
                else DEFAULT_DTYPE
        value = float(x) if is_float(dtype) else bool(x) if dtype == BOOL else \
            checks.int32_value(fn, name, x)
        return _constant((), value, dtype)
    if isinstance(x, (np.ndarray, list, tuple)):
        array = np.asarray(x)
        kind = array.dtype.kind
        dtype = BOOL if kind == "b" else INT32 if kind in "iu" else DEFAULT_DTYPE
        return ag_tensor(host_array(fn, name, array, dtype), dtype=dtype)
    raise bad_type(fn, name, x, "a Tensor, a NumPy array or a number")


def _operands(fn: str, a, b, names=("input", "other")) -> tuple:
    """Both operands as tensors; a number takes the kind of the tensor beside it, on either
    side."""
    if not isinstance(a, Tensor) and isinstance(b, Tensor):
        return _operand(fn, names[0], a, b), b
    a = _operand(fn, names[0], a, b)
    return a, _operand(fn, names[1], b, a)


def _to(backend, t: Tensor, dtype) -> Tensor:
    """``t`` as ``dtype``: itself, or a converted copy (gradients flow between floats)."""
    if t.dtype == dtype:
        return t
    if is_floating(t.dtype) and is_floating(dtype):
        return converted(backend, t, dtype)
    return adopt(backend, Tensor(t.shape, dtype), backend.cast(handle(backend, t), dtype))


def _promoted(fn: str, a: Tensor, b: Tensor) -> tuple:
    """(a, b) converted to their common dtype, PyTorch's promotion."""
    if a.dtype == b.dtype:
        return a, b
    if is_float(a.dtype) and is_float(b.dtype):
        raise ArgumentTypeError(f"{fn}: operands have dtypes {a.dtype} and {b.dtype}; "
                                "convert one so they match")
    dtype = a.dtype if _rank(a.dtype) >= _rank(b.dtype) else b.dtype
    backend = device.active()
    return _to(backend, a, dtype), _to(backend, b, dtype)


def _result(backend, h, dtype=BOOL) -> Tensor:
    return adopt(backend, Tensor(h.shape, dtype), h)


def _compare(op: str, a, b) -> Tensor:
    a, b = _promoted(op, *_operands(op, a, b))
    _broadcast(op, a.shape, b.shape)
    backend = device.active()
    if a.dtype == BOOL:           # (bools compare as ints)
        a, b = _to(backend, a, INT32), _to(backend, b, INT32)
    return _result(backend, backend.logic(op, handle(backend, a), handle(backend, b)))


@computes_in_float32
def eq(input, other) -> Tensor:  # noqa: A002 - PyTorch's argument names
    """input == other elementwise, with broadcasting: a boolean tensor (NaN equals
    nothing)."""
    return _compare("eq", input, other)


@computes_in_float32
def ne(input, other) -> Tensor:  # noqa: A002
    """input != other elementwise, with broadcasting: a boolean tensor (true at NaN)."""
    return _compare("ne", input, other)


@computes_in_float32
def lt(input, other) -> Tensor:  # noqa: A002
    """input < other elementwise, with broadcasting: a boolean tensor."""
    return _compare("lt", input, other)


@computes_in_float32
def le(input, other) -> Tensor:  # noqa: A002
    """input <= other elementwise, with broadcasting: a boolean tensor."""
    return _compare("le", input, other)


@computes_in_float32
def gt(input, other) -> Tensor:  # noqa: A002
    """input > other elementwise, with broadcasting: a boolean tensor."""
    return _compare("gt", input, other)


@computes_in_float32
def ge(input, other) -> Tensor:  # noqa: A002
    """input >= other elementwise, with broadcasting: a boolean tensor."""
    return _compare("ge", input, other)


def _test(op: str, x) -> Tensor:
    x = _operand(op, "input", x)
    backend = device.active()
    h = handle(backend, x)
    if is_float(x.dtype):
        return _result(backend, backend.logic(op, h))
    # an integer or boolean is never NaN or infinite: x != x (all false), x == x (all true)
    return _result(backend, backend.logic("eq" if op == "isfinite" else "ne", h, h))


@computes_in_float32
def isnan(input) -> Tensor:  # noqa: A002
    """Whether each element is NaN: a boolean tensor."""
    return _test("isnan", input)


@computes_in_float32
def isinf(input) -> Tensor:  # noqa: A002
    """Whether each element is +-inf: a boolean tensor."""
    return _test("isinf", input)


@computes_in_float32
def isfinite(input) -> Tensor:  # noqa: A002
    """Whether each element is neither NaN nor infinite: a boolean tensor."""
    return _test("isfinite", input)


def _as_bool(fn: str, name: str, x, like=None) -> Tensor:
    x = _operand(fn, name, x, like)
    return _to(device.active(), x, BOOL)


def _logical(op: str, a, b) -> Tensor:
    a = _as_bool(op, "input", a)
    b = _as_bool(op, "other", b, a)
    _broadcast(op, a.shape, b.shape)
    backend = device.active()
    return _result(backend, backend.logic(op, handle(backend, a), handle(backend, b)))


@computes_in_float32
def logical_and(input, other) -> Tensor:  # noqa: A002
    """Both nonzero, elementwise with broadcasting: a boolean tensor (``&`` of bools)."""
    return _logical("logical_and", input, other)


@computes_in_float32
def logical_or(input, other) -> Tensor:  # noqa: A002
    """Either nonzero, elementwise with broadcasting: a boolean tensor (``|`` of bools)."""
    return _logical("logical_or", input, other)


@computes_in_float32
def logical_xor(input, other) -> Tensor:  # noqa: A002
    """Exactly one nonzero, elementwise with broadcasting: a boolean tensor (``^``)."""
    return _logical("logical_xor", input, other)


@computes_in_float32
def logical_not(input) -> Tensor:  # noqa: A002
    """Whether each element is zero: a boolean tensor (``~`` of a bool tensor)."""
    x = _as_bool("logical_not", "input", input)
    backend = device.active()
    return _result(backend, backend.logic("logical_not", handle(backend, x)))


_ONLY_CONDITION = object()


@computes_in_float32
def where(condition, input=_ONLY_CONDITION, other=_ONLY_CONDITION) -> Tensor:  # noqa: A002
    """``input`` where ``condition`` (a boolean tensor or array) holds, else ``other``,
    broadcasting the three, as ``torch.where``; either value may be a number. The
    gradient goes to the side each element was taken from. ``where(condition)`` alone is
    ``nonzero(condition, as_tuple=True)``, as PyTorch's."""
    if input is _ONLY_CONDITION and other is _ONLY_CONDITION:
        from .statistics import nonzero
        return nonzero(condition, as_tuple=True)
    if input is _ONLY_CONDITION or other is _ONLY_CONDITION:
        raise ArgumentTypeError("where: give both 'input' and 'other', or neither (the "
                                "indices where condition holds)")
    cond = _operand("where", "condition", condition)
    if cond.dtype != BOOL:
        raise ArgumentTypeError(f"where: argument 'condition' is a {cond.dtype} tensor; "
                                "expected a bool tensor (compare to make one)")
    a, b = _promoted("where", *_operands("where", input, other))
    _shape_of_three("where", cond.shape, a.shape, b.shape)
    backend = device.active()
    hc = handle(backend, cond)
    h = backend.where(hc, handle(backend, a), handle(backend, b))
    if not is_float(a.dtype):
        return _result(backend, h, a.dtype)
    a_shape, b_shape = a.shape, b.shape

    def backward(g, needs):
        zero = handle(backend, _constant((), 0.0, g.dtype))
        return (_sum_to(backend, backend.where(hc, g, zero), a_shape) if needs[0] else None,
                _sum_to(backend, backend.where(hc, zero, g), b_shape) if needs[1] else None)
    return _make(h, (a, b), backward, backend)


def _shape_of_three(fn: str, *shapes) -> tuple:
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise ShapeError(f"{fn}: shapes {', '.join(map(str, shapes))} cannot be broadcast "
                         "together (NumPy rules: trailing dimensions must match or be 1)"
                         ) from None
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{fn}: shapes broadcast to {shape}; at most {MAX_RANK} dimensions")
    return shape


@computes_in_float32
def masked_fill(input, mask, value) -> Tensor:  # noqa: A002
    """``input`` with ``value`` (a number or a 0-d tensor) where ``mask`` (a boolean
    tensor broadcastable to it) holds, as ``torch.Tensor.masked_fill``; the gradient of
    ``input`` is zero there."""
    x = _operand("masked_fill", "input", input)
    if not isinstance(value, (Tensor, bool, np.bool_)) and not checks.is_number(value):
        raise bad_type("masked_fill", "value", value, "a number or a 0-d tensor")
    if isinstance(value, Tensor) and value.ndim:
        raise bad_type("masked_fill", "value", value, "a number or a 0-d tensor")
    mask_shape = mask.shape if isinstance(mask, Tensor) else np.shape(mask)
    if _shape_of_three("masked_fill", mask_shape, x.shape) != x.shape:
        raise ShapeError(f"masked_fill: argument 'mask' has shape {mask_shape}; expected a "
                         f"shape that broadcasts to the input's {x.shape}")
    if x.dtype == INT32 and checks.is_number(value):      # (truncated; inf refused)
        value = checks.int32_value("masked_fill", "value", value)
    out = where(mask, value if isinstance(value, Tensor) else
                _operand("masked_fill", "value", value, x), x)
    return out if out.dtype == x.dtype else _to(device.active(), out, x.dtype)


def _count(fn: str, x, axis, keepdims, which: str) -> Tensor:
    x = _as_bool(fn, "input", x)
    axes = _axes(fn, x, axis)
    backend = device.active()
    h = handle(backend, x)
    if which == "all":
        h = backend.logic("logical_not", h)
    counts = backend.reduce("sum", backend.cast(h, DEFAULT_DTYPE), axes, keepdims)
    zero = handle(backend, _constant((), 0.0, DEFAULT_DTYPE))
    return _result(backend, backend.logic("gt" if which == "any" else "eq", counts, zero))


@computes_in_float32
def any(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    """Whether any element (along ``dim``: an int, a tuple or None for all) is nonzero: a
    boolean tensor; of no elements, False."""
    dim, keepdim = _dim_or_axis("any", None, dim, None, keepdim)
    return _count("any", input, dim, keepdim, "any")


@computes_in_float32
def all(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001, A002
    """Whether every element (along ``dim``) is nonzero: a boolean tensor; of no elements,
    True."""
    dim, keepdim = _dim_or_axis("all", None, dim, None, keepdim)
    return _count("all", input, dim, keepdim, "all")


def _argreduce(op: str, input, dim, keepdim) -> Tensor:
    x = _operand(op, "input", input)
    if x.dtype == BOOL:
        x = _to(device.active(), x, INT32)
    checks.flag(op, "keepdim", keepdim)
    if x.size == 0 and dim is None:
        raise ShapeError(f"{op}: argument 'input' has shape {x.shape}; expected at least one "
                         "element (no index points at nothing)")
    if dim is None:
        outer, n, inner = 1, x.size, 1
        shape = (1,) * x.ndim if keepdim else ()
    else:
        d = _axes(op, x, dim)
        if len(d) != 1 and x.ndim:
            raise bad_type(op, "dim", dim, "None or one int")
        d = d[0] if x.ndim else 0
        full = x.shape or (1,)
        outer, n = int(np.prod(full[:d])), full[d]
        inner = int(np.prod(full[d + 1:]))
        shape = tuple(1 if k == d else s for k, s in enumerate(x.shape)) if keepdim else \
            tuple(s for k, s in enumerate(x.shape) if k != d)
        if n == 0:
            raise ShapeError(f"{op}: dim {d} of the input has no elements")
        if x.size == 0:                 # (another axis is empty: so is the result)
            return _constant(shape, 0, INT32)
    backend = device.active()
    h = backend.argreduce(op, handle(backend, x), outer, n, inner)
    return _result(backend, backend.reshape(h, shape), INT32)


@computes_in_float32
def argmax(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The index of the first maximum along ``dim`` (None: of the flattened tensor), as an
    int32 tensor; a NaN counts as the maximum, as in PyTorch."""
    return _argreduce("argmax", input, dim, keepdim)


@computes_in_float32
def argmin(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The index of the first minimum along ``dim`` (None: of the flattened tensor), as an
    int32 tensor; a NaN counts as the minimum, as in PyTorch."""
    return _argreduce("argmin", input, dim, keepdim)


@computes_in_float32
def one_hot(tensor, num_classes: int = -1) -> Tensor:
    """``tensor``'s class indices (int32 tensor or integer array) as one-hot rows: an
    int32 tensor of shape tensor.shape + (num_classes,), as
    ``torch.nn.functional.one_hot`` (num_classes -1: the largest index + 1, read from the
    values). The indices are read to the host, to be checked."""
    idx = _operand("one_hot", "tensor", tensor)
    if idx.dtype != INT32:
        raise bad_type("one_hot", "tensor", tensor, "integer class indices")
    num_classes = checks.integer("one_hot", "num_classes", num_classes, -1)
    values = idx.numpy() if num_classes == -1 or idx.size else None
    if num_classes == -1:
        if not idx.size:
            raise ShapeError("one_hot: num_classes -1 needs at least one index to count")
        num_classes = int(values.max()) + 1
    if values is not None and values.size and (values.min() < 0 or
                                                values.max() >= num_classes):
        raise IndexOutOfRange(f"one_hot: argument 'tensor' holds index "
                              f"{int(values[(values < 0) | (values >= num_classes)][0])}; "
                              f"expected indices in [0, {num_classes})")
    if idx.ndim + 1 > MAX_RANK:
        raise ShapeError(f"one_hot: the result would have {idx.ndim + 1} dimensions; at most "
                         f"{MAX_RANK}")
    backend = device.active()
    classes = _constant_range(backend, num_classes)
    column = backend.reshape(handle(backend, idx), idx.shape + (1,))
    return _result(backend, backend.logic("eq", column, classes), INT32)


def _float_range(backend, n: int):
    """0, 1, ..., n - 1 as float32 storage, made on the device (no upload): the running sum
    of ones, less one (exact below 2^24)."""
    ones = backend.empty((n,), DEFAULT_DTYPE)
    backend.fill(ones, 1.0)
    return backend.unary("add_scalar", backend.cumsum(ones, 1, n, 1, False), -1.0)


def _constant_range(backend, n: int):
    """0, 1, ..., n - 1 as int32 storage, made on the device."""
    return backend.cast(_float_range(backend, n), INT32)


def _triangle(fn: str, input, diagonal: int, upper: bool) -> Tensor:
    x = _operand(fn, "input", input)
    if x.ndim < 2:
        raise ShapeError(f"{fn}: argument 'input' has shape {x.shape}; expected at least 2 "
                         "dimensions (a matrix or a batch of them)")
    diagonal = checks.integer(fn, "diagonal", diagonal)
    rows, cols = x.shape[-2:]
    backend = device.active()
    # column - row for each (row, column), formed on the device (exact: small integers)
    r = backend.reshape(_float_range(backend, rows), (rows, 1))
    c = backend.reshape(_float_range(backend, cols), (1, cols))
    offset = backend.binary("sub", c, r)
    bound = handle(backend, _constant((), float(diagonal), DEFAULT_DTYPE))
    keep = _result(backend, backend.logic("ge" if upper else "le", offset, bound))
    return where(keep, x, False if x.dtype == BOOL else 0)


@computes_in_float32
def tril(input, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The lower triangle of the last two axes (column - row <= ``diagonal``), zeros above,
    as ``torch.tril`` (NaN and inf above the diagonal become 0 too)."""
    return _triangle("tril", input, diagonal, False)


@computes_in_float32
def triu(input, diagonal: int = 0) -> Tensor:  # noqa: A002
    """The upper triangle of the last two axes (column - row >= ``diagonal``), zeros below,
    as ``torch.triu``."""
    return _triangle("triu", input, diagonal, True)


_INT_OPS = {"add": "int_add", "sub": "int_sub", "mul": "int_mul",
            "floor_divide": "int_floor_divide", "remainder": "int_remainder",
            "maximum": "int_maximum", "minimum": "int_minimum", "pow": "int_pow"}


def integer_binary(op: str, fn: str, a, b):
    """a op b where an operand is an int32 or bool tensor: the int32 result where both are
    integers (tensors or ints) and ``op`` has an integer form, else (a, b) promoted to
    float for the float op (PyTorch's promotion; true division is a float op). A power of
    integers with a negative int for its exponent raises, as PyTorch's (where the exponent
    is a tensor, its negative elements give 1 / x ** -y truncated, as PyTorch's do)."""
    if op == "pow" and isinstance(b, (int, np.integer)) and not isinstance(b, bool) and b < 0 \
            and isinstance(a, Tensor) and not is_float(a.dtype):
        raise bad_value(fn, "b", b, "an int >= 0 for the power of an integer tensor (integers "
                                    "to negative integer powers are not allowed; a float "
                                    "exponent gives a float result)")
    a, b = _operands(fn, a, b, ("a", "b"))
    if op in _INT_OPS and not is_float(a.dtype) and not is_float(b.dtype):
        _broadcast(fn, a.shape, b.shape)
        backend = device.active()
        a, b = _to(backend, a, INT32), _to(backend, b, INT32)
        return _result(backend, backend.integer(_INT_OPS[op], handle(backend, a),
                                                handle(backend, b)), INT32)
    dtype = a.dtype if is_float(a.dtype) else b.dtype if is_float(b.dtype) else DEFAULT_DTYPE
    backend = device.active()
    return _to(backend, a, dtype), _to(backend, b, dtype)


# Unary ops whose result of integers is integers in PyTorch: int32 here, of an int32 or bool
# tensor (the roundings of an integer are itself).
INTEGER_UNARY = frozenset(("neg", "abs", "relu", "square", "sign", "floor", "ceil", "round",
                           "trunc"))


def integer_unary(op: str, x: Tensor) -> Tensor:
    """``op`` (one of INTEGER_UNARY) of an int32 or bool tensor, as int32: -x and |x|
    wrapping at INT_MIN, as int32 arithmetic does, and x * x too."""
    backend = device.active()
    x = _to(backend, x, INT32)
    h = handle(backend, x)
    if op in ("neg", "abs"):
        return _result(backend, backend.integer(f"int_{op}", h), INT32)
    if op == "square":
        return _result(backend, backend.integer("int_mul", h, h), INT32)
    if op == "relu":
        zero = handle(backend, _constant((), 0, INT32))       # (broadcast)
        return _result(backend, backend.integer("int_maximum", h, zero), INT32)
    if op == "sign":                            # (x > 0) - (x < 0)
        return ops.sub(gt(x, 0), lt(x, 0))
    copy = backend.empty(x.shape, INT32)        # (a rounding: x itself, in a tensor of its own)
    backend.copy(copy, h)
    return _result(backend, copy, INT32)


@computes_in_float32
def floor_divide(input, other) -> Tensor:  # noqa: A002
    """input // other rounded toward -inf (Python's and PyTorch's rule), with broadcasting.
    Of integers an int32 tensor (a zero divisor gives 0, where PyTorch raises); of floats
    PyTorch's float rule (x / y where y is 0, NaN for an infinite x), exact while the
    quotient is below 2^29, with no gradient (a step function; PyTorch's raises)."""
    return ops._binary("floor_divide", "floor_divide", input, other)


@computes_in_float32
def remainder(input, other) -> Tensor:  # noqa: A002
    """input % other with the sign of ``other`` (Python's and PyTorch's rule), with
    broadcasting. Of integers an int32 tensor (a zero divisor gives 0, where PyTorch
    raises); of floats exact (NaN where y is 0 or x infinite), its gradients g and
    -g * floor_divide(input, other)."""
    return ops._binary("remainder", "remainder", input, other)


def to(input, dtype) -> Tensor:  # noqa: A002
    """``input`` converted to ``dtype`` (float32, float64 on the cpu, int32, bool, float16,
    bfloat16): a float to int32 truncates toward zero (saturating past int32's range, NaN
    giving 0); to bool, nonzero is True; to float16 or bfloat16 a float32 rounds to nearest
    even (past the largest finite value to inf), and back it is exact; the 16-bit types
    convert from and to the others through float32 (as PyTorch's do, an int32 or a float64
    rounding twice). The gradient flows between float types."""
    x = input if isinstance(input, Tensor) else _operand("to", "input", input)
    dtype = resolve_dtype("to", dtype)
    backend = device.active()
    if not backend.supports(dtype):
        raise ArgumentTypeError(f"to: the {backend.name} backend has no {dtype} tensors")
    if (x.dtype in LOW_PRECISION or dtype in LOW_PRECISION) and \
            DEFAULT_DTYPE not in (x.dtype, dtype) and x.dtype != dtype:
        x = _to(backend, x, DEFAULT_DTYPE)
    return _to(backend, x, dtype)


@computes_in_float32
def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
            equal_nan: bool = False) -> Tensor:
    """Whether input == other, or both are finite and |input - other| <= atol +
    rtol * |other|, elementwise with broadcasting (in float32, integers converted), as
    ``torch.isclose``: a boolean tensor; NaNs are close to each other with ``equal_nan``."""
    rtol = checks.number("isclose", "rtol", rtol, 0.0)
    atol = checks.number("isclose", "atol", atol, 0.0)
    equal_nan = checks.flag("isclose", "equal_nan", equal_nan)
    a, b = _promoted("isclose", *_operands("isclose", input, other))
    _broadcast("isclose", a.shape, b.shape)
    with tape.no_grad():
        if not is_float(a.dtype):
            backend = device.active()
            a, b = _to(backend, a, DEFAULT_DTYPE), _to(backend, b, DEFAULT_DTYPE)
        error = ops.abs(ops.sub(a, b))
        near = logical_and(isfinite(error), le(error, ops.add(ops.abs(ops.mul(b, rtol)),
                                                               atol)))
        close = logical_or(eq(a, b), near)
        if equal_nan:
            close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08,  # noqa: A002
             equal_nan: bool = False) -> bool:
    """Whether every element pair is ``isclose``: a Python bool (the answer is read back)."""
    return bool(all(isclose(input, other, rtol, atol, equal_nan)).item())


def equal(input, other) -> bool:  # noqa: A002
    """Whether the two tensors have the same shape and equal elements (NaN equals
    nothing), as ``torch.equal``: a Python bool."""
    a, b = _operands("equal", input, other)
    if a.shape != b.shape:
        return False
    return bool(all(eq(a, b)).item())


def _install_methods() -> None:
    T = Tensor
    T.__hash__ = object.__hash__          # (as PyTorch's: == is elementwise, hash is id)
    for name, fn in (("eq", eq), ("ne", ne), ("lt", lt), ("le", le), ("gt", gt), ("ge", ge)):
        setattr(T, f"__{name}__", lambda a, b, f=fn: f(a, b))
        setattr(T, name, lambda a, b, f=fn: f(a, b))
    for name, fn in (("and", logical_and), ("or", logical_or), ("xor", logical_xor)):
        setattr(T, f"__{name}__", lambda a, b, f=fn, n=name: _bitwise(n, f, a, b))
        setattr(T, f"__r{name}__", lambda a, b, f=fn, n=name: _bitwise(n, f, b, a))
    T.__invert__ = lambda a: _bitwise("invert", lambda x, _: logical_not(x), a, None)
    T.isnan, T.isinf, T.isfinite = isnan, isinf, isfinite
    T.logical_not = logical_not
    T.masked_fill = lambda a, mask, value: masked_fill(a, mask, value)
    T.any = lambda a, dim=None, keepdim=False: any(a, dim, keepdim)
    T.__floordiv__ = lambda a, b: floor_divide(a, b)
    T.__rfloordiv__ = lambda a, b: floor_divide(b, a)
    T.__mod__ = lambda a, b: remainder(a, b)
    T.__rmod__ = lambda a, b: remainder(b, a)
    T.floor_divide = lambda a, b: floor_divide(a, b)
    T.remainder = lambda a, b: remainder(a, b)
    T.fmod = lambda a, b: ops.fmod(a, b)
    T.tril = lambda a, diagonal=0: tril(a, diagonal)
    T.triu = lambda a, diagonal=0: triu(a, diagonal)
    T.argmax = lambda a, dim=None, keepdim=False: argmax(a, dim, keepdim)
    T.argmin = lambda a, dim=None, keepdim=False: argmin(a, dim, keepdim)
    T.all = lambda a, dim=None, keepdim=False: all(a, dim, keepdim)
    T.to = _tensor_to
    T.astype = lambda a, dtype: to(a, dtype)
    T.cpu = lambda a: _tensor_to(a, "cpu")
    T.cuda = lambda a, device=None: _tensor_to(a, "cuda")
    T.float = lambda a: to(a, np.float32)
    T.double = lambda a: to(a, np.float64)
    T.int = lambda a: to(a, np.int32)
    T.long = T.int                        # (integer tensors are int32)
    T.bool = lambda a: to(a, np.bool_)
    T.half = lambda a: to(a, np.float16)
    T.bfloat16 = lambda a: to(a, "bfloat16")


def _tensor_to(self, *args, dtype=None, non_blocking: bool = False, copy: bool = False):
    """``t.to(dtype)``, ``t.to(device)``, ``t.to(device, dtype)`` or ``t.to(other)``, as
    PyTorch's: a device name ("cpu", "gpu", "cuda", "cuda:N") changes nothing (tensors live
    on the active backend: ``device.is_placement``); a dtype converts, as ``to``."""
    target = dtype
    for k, arg in enumerate(args):
        if isinstance(arg, Tensor):
            target = arg.dtype
        elif not device.is_placement("to", arg):
            if target is not None and k:
                raise bad_type("to", "dtype", arg, "one dtype")
            target = arg
    checks.flag("to", "non_blocking", non_blocking)
    out = self if target is None else to(self, target)
    return out.clone() if checks.flag("to", "copy", copy) and out is self else out


def _bitwise(name: str, fn, a, b) -> Tensor:
    """& | ^ ~ of boolean tensors (integer bitwise ops are not supported)."""
    for x in (a, b):
        if isinstance(x, Tensor) and x.dtype != BOOL:
            raise ArgumentTypeError(f"{name}: {x.dtype} tensors have no bitwise ops; use "
                                    "boolean tensors (or logical_and, logical_or, ...)")
    return fn(a, b)


_install_methods()

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "logical_and",
           "logical_or", "logical_xor", "logical_not", "where", "masked_fill", "any", "all",
           "to", "argmax", "argmin", "one_hot", "tril", "triu", "floor_divide", "remainder",
           "isclose", "allclose", "equal"]
