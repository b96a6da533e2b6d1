"""The differential suite: every backend primitive run on both backends with the same inputs,
compared under the tolerance table. ``pytest`` and ``dualgrad verify`` run the same checks.

A check draws its inputs from Hypothesis strategies (``dualgrad.testing.strategies``), runs
the primitive (and its backward twin) on the cpu reference and on the gpu, and returns one
``Agreement`` per compared result. ``run_check`` drives a check for a number of examples and
collects the worst figures per tolerance-table entry.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Callable

import numpy as np
from hypothesis import HealthCheck, Verbosity, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ..backend import Epilogue
from ..cpu.matmul import rounded
from ..kernel_ops import (BINARY, INT_REDUCE, INTEGER, INTEGER_UNARY, LOGIC, LOGIC_UNARY,
                          UNARY)
from . import strategies as dgst
from .tolerances import LOW_TYPES, TOLERANCES, Agreement, agreement, product_scale
from .tolerances import gamma as gamma_n

F32 = np.float32


class Pair:
    """The two backends a check compares: ``ref`` (the cpu reference) and ``dut`` (the
    backend under test, normally the gpu)."""

    def __init__(self, dut, ref=None):
        if ref is None:
            from ..cpu import CpuBackend
            ref = CpuBackend()
        self.ref, self.dut = ref, dut
        ctx = getattr(dut, "ctx", None)
        # Vulkan lets a device without DenormPreserve flush subnormal inputs and results.
        self.flushes = bool(ctx is not None and not ctx.info.get("preserves_denormals", True))

    def specials(self, *kinds) -> tuple:
        """The special values for the kinds given, without subnormals on a device that
        flushes them (it may treat a subnormal input as zero, by the specification)."""
        values = tuple(v for kind in kinds for v in kind)
        return tuple(v for v in values if not (self.flushes and v in dgst.SUBNORMALS))

    def twin(self, name: str, *args, **kwargs):
        """Run primitive ``name`` on both backends: float arrays become each backend's
        storage, integer arrays its index storage, other arguments pass through. Returns
        (reference, under test) results as host arrays (tuples for several outputs)."""
        results = []
        for backend in (self.ref, self.dut):
            out = getattr(backend, name)(*[_prepare(backend, a) for a in args], **kwargs)
            results.append(_fetch(backend, out))
        return results

    def agree(self, key: str, got, ref, **context) -> Agreement:
        return agreement(key, got, ref, flushes_subnormals=self.flushes, **context)


def _prepare(backend, a):
    if isinstance(a, _Stored):
        return backend.upload(a.array)
    if isinstance(a, Epilogue):
        return Epilogue(*(_prepare(backend, h) if h is not None else None
                          for h in (a.bias, a.relu, a.mask, a.row_sums)))
    if isinstance(a, np.generic):
        a = np.asarray(a)
    if isinstance(a, np.ndarray):
        return backend.indices(a) if a.dtype.kind in "iu" else backend.upload(a)
    return a


def _fetch(backend, out):
    if isinstance(out, tuple):
        return tuple(_fetch(backend, o) for o in out)
    return np.array(backend.download(out), copy=True)


@dataclasses.dataclass(frozen=True)
class Check:
    """One primitive's differential check: ``run(data, pair)`` draws inputs with
    Hypothesis's ``data.draw`` and returns the agreements of every compared result."""
    name: str
    run: Callable
    # Whether it draws one of several ops per example, so that its entries share the
    # examples (each op's entry sees some of them, not all).
    samples: bool = False


CHECKS: list = []


def check(name: str, samples: bool = False):
    def register(fn):
        CHECKS.append(Check(name, fn, samples))
        return fn
    return register


# -- elementwise ----------------------------------------------------------------------------
# Where each unary op is drawn, and whether with special values, is its tolerance entry's
# ``domain`` and ``specials``.
# The scalar parameters (a, b) of each op.
_UNARY_PARAMS = {
    "add_scalar": st.tuples(st.floats(-4, 4, width=32), st.just(0.0)),
    "mul_scalar": st.tuples(st.floats(-4, 4, width=32), st.just(0.0)),
    "rsub_scalar": st.tuples(st.floats(-4, 4, width=32), st.just(0.0)),
    "div_scalar": st.tuples(st.sampled_from([-3.0, -0.7, 0.3, 1.0, 3.0, 1e3]), st.just(0.0)),
    "rdiv_scalar": st.tuples(st.sampled_from([-2.0, 0.5, 1.5, 7.0]), st.just(0.0)),
    "pow_scalar": st.tuples(st.sampled_from([-2.0, -0.5, 0.5, 2.0, 2.7, 3.0]), st.just(0.0)),
    "rpow_scalar": st.tuples(st.sampled_from([0.5, 1.7, 2.0, 10.0]), st.just(0.0)),
    # (bounds are normal numbers or 0: a device may flush a subnormal bound to 0, moving
    # the bound itself)
    "clamp": st.tuples(st.floats(-2, 0, width=32, allow_subnormal=False),
                       st.floats(0, 2, width=32, allow_subnormal=False)),
    "hardtanh": st.tuples(st.floats(-2, 0, width=32, allow_subnormal=False),
                          st.floats(0, 2, width=32, allow_subnormal=False)),
    "leaky_relu": st.tuples(st.sampled_from([0.01, 0.2, -0.5, 1.5]), st.just(0.0)),
    "elu": st.tuples(st.sampled_from([0.3, 1.0, 1.7]), st.just(0.0)),
    "celu": st.tuples(st.sampled_from([0.3, 1.0, 1.7]), st.just(0.0)),
    # (0 ties with the zeros among the drawn specials)
    "maximum_scalar": st.tuples(st.sampled_from([-1.5, 0.0, 0.5]), st.just(0.0)),
    "minimum_scalar": st.tuples(st.sampled_from([-1.5, 0.0, 0.5]), st.just(0.0)),
}
# What each op's error grows with (the table's arg(x)): for pow, t = a log2 x, the argument
# of the exp2 that computes it.
_UNARY_GROWTH = {"pow_scalar": lambda x, a: a * np.log2(np.abs(x)),
                 "rpow_scalar": lambda x, a: x * np.log2(a),
                 "celu": lambda x, a: x / a,
                 "gelu_tanh": lambda x, a: 1.5957691216057308 * (x + 0.044715 * x ** 3)}
# The backward of the logarithms divides by x (log1p's by 1 + x): for a finite divisor past
# 2^126 Vulkan bounds no division, and NVIDIA's driver returns 0 for a result near FLT_MIN
# (it multiplies by a reciprocal that flushes), which the table cannot bound.
_DIVIDES_BY_X = {"log", "log2", "log10", "log1p"}


def _unary_specials(pair, op):
    if not TOLERANCES[f"unary:{op}"].specials:
        return ()
    return pair.specials(dgst.FINITE_SPECIALS, dgst.NONFINITE)


def _unary_check(op):
    def run(data, pair):
        lo, hi = TOLERANCES[f"unary:{op}"].domain
        x = data.draw(dgst.arrays(dgst.shapes(max_dims=2, max_size=1 << 14), lo, hi,
                                  specials=_unary_specials(pair, op)), label="x")
        a, b = data.draw(_UNARY_PARAMS.get(op, st.just((0.0, 0.0))), label="a, b")
        with np.errstate(all="ignore"):
            growth = _UNARY_GROWTH.get(op, lambda x, a: x)(x.astype(np.float64), a)
            growth = np.nan_to_num(growth, nan=0.0)
        cy, gy = pair.twin("unary", op, x, a, b)
        g = data.draw(dgst.arrays(x.shape), label="g")
        cg, gg = pair.twin("unary_backward", op, x, cy, g, a, b)
        if op in _DIVIDES_BY_X:      # elements where Vulkan bounds nothing are not compared
            gg = np.where(np.isfinite(x) & (np.abs(x) > 2.0 ** 126), cg, gg)
        with np.errstate(all="ignore"):
            scale = np.abs(g.astype(np.float64) * cy)
        return [pair.agree(f"unary:{op}", gy, cy, x=growth),
                pair.agree(f"unary_backward:{op}", gg, cg, x=growth, scale=scale)]
    return run


for _op in UNARY.names:
    check(f"unary:{_op}")(_unary_check(_op))


def _binary_check(op):
    def run(data, pair):
        sa, sb = data.draw(dgst.broadcast_pairs(), label="shapes")
        if op == "pow":          # GLSL's pow: x > 0
            x = data.draw(dgst.arrays(sa, 0.1, 4.0), label="x")
            y = data.draw(dgst.arrays(sb, -3.0, 3.0), label="y")
        else:
            # div's gradient -g x / y^2 is formed in float32 on the gpu, float64 on the cpu:
            # for |x| near float32's max only the float32 intermediate overflows, and for
            # tiny x it is subnormal, with an absolute error that / y^2 magnifies.
            kinds = (dgst.ZEROS,) if op == "div" else (dgst.FINITE_SPECIALS,)
            x = data.draw(dgst.arrays(sa, specials=pair.specials(*kinds, dgst.NONFINITE)),
                          label="x")
            low = 0.1 if op == "div" else -4.0        # a denominator away from 0
            y = data.draw(dgst.arrays(sb, low, 4.0, specials=() if op == "div" else
                                      pair.specials(dgst.FINITE_SPECIALS, dgst.NONFINITE)),
                          label="y")
            if op == "div":
                y = np.asarray(y * data.draw(st.sampled_from([1, -1]), label="sign"), F32)
        cz, gz = pair.twin("binary", op, x, y)
        with np.errstate(all="ignore"):
            growth = np.broadcast_to(np.nan_to_num(np.abs(y.astype(np.float64)) * 4), cz.shape)
        g = data.draw(dgst.arrays(cz.shape), label="g")
        (cgx, cgy), (ggx, ggy) = pair.twin("binary_backward", op, x, y, g)
        with np.errstate(all="ignore"):
            scale = np.abs(g.astype(np.float64) * cz)
        key = f"binary_backward:{op}"
        return [pair.agree(f"binary:{op}", gz, cz, x=growth),
                pair.agree(key, ggx, cgx, x=growth),
                pair.agree(key, ggy, cgy, x=growth, scale=scale)]
    return run


for _op in BINARY.names:
    check(f"binary:{_op}")(_binary_check(_op))


@check("binary:float32 and 16-bit", samples=True)
def _binary_mixed(data, pair):
    """A float32 operand beside a 16-bit one of the same shape (a residual sum under
    autocast): the 16-bit one widened as it is read, the result float32, within the
    float32 op's bound."""
    op = data.draw(st.sampled_from(["add", "sub", "mul", "div", "maximum", "minimum"]),
                   label="op")
    low = np.dtype(data.draw(st.sampled_from(["bfloat16", "float16"]), label="type"))
    shape = data.draw(dgst.shapes(), label="shape")
    x = data.draw(dgst.arrays(shape, specials=pair.specials(dgst.FINITE_SPECIALS,
                                                            dgst.NONFINITE)), label="x")
    y = data.draw(dgst.arrays(shape, 0.1, 4.0) if op == "div" else
                  dgst.arrays(shape, specials=pair.specials(dgst.NONFINITE)), label="y")
    with np.errstate(over="ignore"):
        y = y.astype(low)
    if data.draw(st.booleans(), label="16-bit first"):
        x, y = y, x
    cz, gz = pair.twin("binary", op, x, y)
    assert cz.dtype == gz.dtype == F32
    with np.errstate(all="ignore"):
        growth = np.nan_to_num(np.abs(y.astype(np.float64)) * 4)
    return [pair.agree(f"binary:{op}", gz, cz, x=growth)]


@check("copy_and_fill")
def _copy_and_fill(data, pair):
    x = data.draw(dgst.arrays(dgst.shapes(), specials=pair.specials(dgst.ALL_SPECIALS)),
                  label="x")
    value = data.draw(st.floats(width=32, allow_nan=False), label="value")
    out = []
    for backend in (pair.ref, pair.dut):
        dst = backend.empty(x.shape, np.dtype(F32))
        backend.copy(dst, backend.upload(x))
        filled = backend.empty(x.shape, np.dtype(F32))
        backend.fill(filled, value)
        out.append((_fetch(backend, dst), _fetch(backend, filled)))
    (c_copy, c_fill), (g_copy, g_fill) = out
    return [pair.agree("copy", g_copy, c_copy), pair.agree("fill", g_fill, c_fill)]


# -- reductions and data movement -------------------------------------------------------------
def _axes(data, ndim):
    if ndim == 0:
        return ()
    axes = data.draw(st.lists(st.integers(0, ndim - 1), min_size=1, unique=True), label="axes")
    return tuple(sorted(axes))


def _reduce_check(op):
    def run(data, pair):
        x = data.draw(dgst.arrays(dgst.shapes(min_dims=1, max_size=1 << 17)), label="x")
        axes = _axes(data, x.ndim)
        if op in ("max", "min") and x.size:
            x.reshape(-1)[:: data.draw(st.integers(2, 7), label="tie stride")] = F32(2.5)
        cy, gy = pair.twin("reduce", op, x, axes, True)
        n = int(np.prod([x.shape[a] for a in axes]))
        scale = np.sum(np.abs(x.astype(np.float64)), axis=axes, keepdims=True)
        if op == "mean":
            scale = scale / max(n, 1)
        g = data.draw(dgst.arrays(cy.shape), label="g")
        cg, gg = pair.twin("reduce_backward", op, x, cy, g, axes)
        return [pair.agree(f"reduce:{op}", gy, cy, scale=scale, length=n),
                pair.agree(f"reduce_backward:{op}", gg, cg)]
    return run


for _op in ("sum", "mean", "max", "min"):
    check(f"reduce:{_op}")(_reduce_check(_op))


@check("reduce:sum_squares")
def _reduce_sum_squares(data, pair):
    """The sum of x * x (a 2-norm's, no backward kernel of its own), or of (x - center)^2
    about a center an output (a variance's: here the float32 mean, or drawn)."""
    x = data.draw(dgst.arrays(dgst.shapes(min_dims=1, max_size=1 << 17)), label="x")
    axes = _axes(data, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    kept = tuple(1 if a in axes else k for a, k in enumerate(x.shape))
    center = data.draw(st.sampled_from(["none", "mean", "drawn"]), label="center")
    if center == "none":
        c = np.zeros(kept, F32)
        cy, gy = pair.twin("reduce", "sum_squares", x, axes, True)
    else:
        with np.errstate(all="ignore"):   # (0 / 0 where no element: np.mean would warn)
            c = ((np.sum(x.astype(np.float64), axis=axes, keepdims=True) / n).astype(F32)
                 if center == "mean" else data.draw(dgst.arrays(kept), label="drawn center"))
        cy, gy = pair.twin("reduce", "sum_squares", x, axes, True, None, c)
    with np.errstate(all="ignore"):
        scale = np.sum(np.square(x.astype(np.float64) - c), axis=axes, keepdims=True)
    # (x - c rounds once more on the gpu: 3 roundings a term, where x * x has 1)
    return [pair.agree("reduce:sum_squares", gy, cy, scale=scale,
                       length=n + (1 if center == "none" else 3))]


@check("reduce:var")
def _reduce_var(data, pair):
    """The variance kernel: the sum of squares about each output's own mean, over a
    divisor (n - correction; 0 where n <= correction). The elements sit about an offset
    drawn up to 1e6, where a mean's rounding is the danger (a large mean cancels)."""
    offset = data.draw(st.sampled_from([0.0, 100.0, -3e4, 1e6]), label="offset")
    x = data.draw(dgst.arrays(dgst.shapes(min_dims=1, max_size=1 << 17)), label="x") + F32(offset)
    axes = _axes(data, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    correction = data.draw(st.sampled_from([0.0, 1.0, 0.5, float(n)]), label="correction")
    divisor = max(n - correction, 0.0)
    cy, gy = pair.twin("reduce", "var", x, axes, True, None, None, divisor)
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):   # (no element: 0 / 0)
        mean = np.sum(wide, axis=axes, keepdims=True) / n
        # a run's float32 mean errs by e <= gamma(n + 1) sum|x| / n, which adds n e^2 to
        # the squares the kernel sums (tolerances.py: "reduce:var")
        e = gamma_n(n + 1) * np.sum(np.abs(wide), axis=axes, keepdims=True) / n
        squares = np.sum(np.square(wide - mean), axis=axes, keepdims=True) + n * e * e
        # (a sum of squares past float32's range overflows on one side and not the other)
        scale = np.where(squares > np.finfo(F32).max, np.inf, squares / divisor)
    return [pair.agree("reduce:var", gy, cy, scale=scale, length=n + 3)]


@check("reduce:sum_exp")
def _reduce_sum_exp(data, pair):
    """The sum of exp(x - center), a center an output: the maximum (a log-sum-exp's), or
    drawn within 60 of the elements (no term overflows nor underflows far); signed zeros,
    inf and NaN among the elements."""
    shape = data.draw(dgst.shapes(min_dims=1, max_size=1 << 17), label="shape")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    x = rng.uniform(-30, 30, shape).astype(F32)
    specials = data.draw(st.lists(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]),
                                  max_size=3), label="specials")
    if x.size:
        x.reshape(-1)[rng.integers(0, x.size, len(specials))] = specials
    axes = _axes(data, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    kept = tuple(1 if a in axes else k for a, k in enumerate(x.shape))
    if data.draw(st.booleans(), label="center is the maximum"):
        with np.errstate(invalid="ignore"):
            c = (np.clip(np.max(x, axis=axes, keepdims=True), -3e38, 3e38) if n else
                 np.zeros(kept, F32)).astype(F32)
    else:
        c = rng.uniform(-30, 30, kept).astype(F32)
    cy, gy = pair.twin("reduce", "sum_exp", x, axes, True, None, c)
    with np.errstate(all="ignore"):
        d = x.astype(np.float64) - c
        terms = np.where(d == -np.inf, 0.0, np.exp(d) * (4 + 2.5 * np.abs(d)))  # (0, not NaN)
        scale = np.sum(terms, axis=axes, keepdims=True)
    return [pair.agree("reduce:sum_exp", gy, cy, scale=scale, length=n)]


@check("reduce:prod")
def _reduce_prod(data, pair):
    """Magnitudes 2^u, u in [-1, 1], so no partial product of up to 4096 terms leaves the
    normal range in any order (where one would, the order decides between 0 or inf and a
    finite result); signed zeros, inf and NaN among them. (Its gradient is a composition.)"""
    shape = data.draw(dgst.shapes(min_dims=1, max_size=1 << 12), label="shape")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    x = (np.exp2(rng.uniform(-1, 1, shape)) * rng.choice([-1, 1], shape)).astype(F32)
    specials = data.draw(st.lists(st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]),
                                  max_size=3), label="specials")
    if x.size:
        x.reshape(-1)[rng.integers(0, x.size, len(specials))] = specials
    axes = _axes(data, x.ndim)
    cy, gy = pair.twin("reduce", "prod", x, axes, True)
    n = int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.abs(np.prod(x.astype(np.float64), axis=axes, keepdims=True))
    return [pair.agree("reduce:prod", gy, cy, scale=scale, length=n)]


# -- boolean results, selection, conversion -------------------------------------------------
def _logic_operands(data, pair, op):
    """Float operands with ties, signed zeros, NaN and infinities, int32 ones, or for the
    logical ops bools (a byte each)."""
    if op.startswith("logical") and data.draw(st.booleans(), label="bool"):
        sa, sb = data.draw(dgst.broadcast_pairs(), label="shapes")
        x = _bools(data, sa, "x")
        return x, (None if op in LOGIC_UNARY else _bools(data, sb, "y"))
    if op.startswith("logical") or data.draw(st.booleans(), label="int32"):
        elements = st.integers(-3, 3) if op.startswith("logical") else INT32_RANGE
        sa, sb = data.draw(dgst.broadcast_pairs(), label="shapes")
        x = _int32s(data, sa, "x", elements)
        return x, (None if op in LOGIC_UNARY else _int32s(data, sb, "y", elements))
    sa, sb = data.draw(dgst.broadcast_pairs(), label="shapes")
    specials = dgst.ALL_SPECIALS        # (subnormals too: the kernel compares bits)
    x = data.draw(dgst.arrays(sa, specials=specials), label="x")
    if op in LOGIC_UNARY:
        return x, None
    y = data.draw(dgst.arrays(sb, specials=specials), label="y")
    if sb == np.broadcast_shapes(sa, sb) and data.draw(st.booleans(), label="ties"):
        # every third element of y made x's (where both are read there)
        third = np.arange(y.size).reshape(sb) % 3 == 0
        y = np.where(third, np.broadcast_to(x, sb), y).astype(F32)
    return x, y


INT32_RANGE = st.integers(-2 ** 31, 2 ** 31 - 1)


def _bools(data, shape, label: str) -> np.ndarray:
    return np.asarray(data.draw(hnp.arrays(np.bool_, shape), label=label), np.bool_)


def _int32s(data, shape, label: str, elements=INT32_RANGE) -> np.ndarray:
    """An int32 array of ``shape`` drawn element by element (edges such as INT_MIN and -1
    come up, and failures shrink)."""
    from hypothesis.extra import numpy as hnp
    return np.asarray(data.draw(hnp.arrays(np.int32, shape, elements=elements), label=label),
                      np.int32)


def _logic_check(op):
    def run(data, pair):
        x, y = _logic_operands(data, pair, op)
        if x.dtype == np.int32 and op in ("isnan", "isinf", "isfinite"):
            x = x.astype(F32)
        if op == "logical_not" and x.dtype == F32:
            x = x.astype(np.int32)
        args = (x,) if y is None else (x, y)
        cz, gz = pair.twin("logic", op, *[_as_storage(a) for a in args])
        return [pair.agree(f"logic:{op}", gz, cz)]
    return run


for _op in LOGIC.names:
    check(f"logic:{_op}")(_logic_check(_op))


def _as_storage(a):
    """An int32 operand passed as storage (not as index arrays, which ``twin`` would make of
    integer arrays)."""
    return _Stored(a) if a.dtype == np.int32 else a


class _Stored:
    def __init__(self, array):
        self.array = array


def _integer_check(op):
    def run(data, pair):
        sa, sb = data.draw(dgst.broadcast_pairs(), label="shapes")
        ints = data.draw(st.sampled_from([INT32_RANGE, st.integers(-9, 9)]), label="range")
        args = [_int32s(data, sa, "x", ints)]
        if op not in INTEGER_UNARY:
            args.append(_int32s(data, sb, "y", ints))
        cz, gz = pair.twin("integer", op, *[_as_storage(a) for a in args])
        return [pair.agree(f"integer:{op}", gz, cz)]
    return run


for _op in INTEGER.names:
    check(f"integer:{_op}")(_integer_check(_op))


@check("where")
def _where(data, pair):
    sc, sa = data.draw(dgst.broadcast_pairs(), label="shapes")
    sb = data.draw(st.sampled_from([sa, sc, ()]), label="shape of other")
    cond = _bools(data, sc, "cond")
    if data.draw(st.booleans(), label="int32"):
        a, b = _int32s(data, sa, "a"), _int32s(data, sb, "b")
    else:
        specials = dgst.ALL_SPECIALS      # (subnormals too: a selection copies bits)
        a = data.draw(dgst.arrays(sa, specials=specials), label="a")
        b = data.draw(dgst.arrays(sb, specials=specials), label="b")
    cz, gz = pair.twin("where", *[_as_storage(v) for v in (cond, a, b)])
    return [pair.agree("where", gz, cz)]


def _lines(data, x) -> tuple:
    """(outer, n, inner): x read along one drawn axis, or as one line of all its elements."""
    if data.draw(st.booleans(), label="all axes"):
        return 1, x.size, 1
    dim = data.draw(st.integers(0, x.ndim - 1), label="dim")
    return int(np.prod(x.shape[:dim])), x.shape[dim], int(np.prod(x.shape[dim + 1:]))


@check("argreduce")
def _argreduce(data, pair):
    """Along one axis or all, with ties (small integers), NaN and infinities; lines long
    enough for the device's chunks."""
    op = data.draw(st.sampled_from(["argmax", "argmin"]), label="op")
    shape = data.draw(st.one_of(dgst.shapes(min_dims=1, max_size=1 << 14)
                                .map(lambda s: tuple(n or 1 for n in s)),      # (not empty)
                                st.tuples(st.integers(1, 3), st.integers(1, 1 << 18))),
                      label="shape")
    if data.draw(st.booleans(), label="int32"):
        x = _int32s(data, shape, "x", st.integers(-3, 3))
    else:
        x = data.draw(dgst.arrays(shape, -3, 3, specials=dgst.ALL_SPECIALS),   # (bit keys)
                      label="x")
    outer, n, inner = _lines(data, x)
    cz, gz = pair.twin("argreduce", op, _as_storage(x), outer, n, inner)
    return [pair.agree("argreduce", gz, cz)]


def _int_reduce_check(op):
    def run(data, pair):
        """Along one axis or all (sums wrapping past int32's range); rows long enough for
        the device's workgroup runs, and columns."""
        shape = data.draw(st.one_of(dgst.shapes(min_dims=1, max_size=1 << 14),
                                    st.tuples(st.integers(1, 3), st.integers(1, 1 << 18))),
                          label="shape")
        if op != "int_sum":                 # (a maximum of nothing is refused)
            shape = tuple(n or 1 for n in shape)
        x = _int32s(data, shape, "x")
        outer, n, inner = _lines(data, x)
        cz, gz = pair.twin("int_reduce", op, _as_storage(x), outer, n, inner)
        return [pair.agree(f"int_reduce:{op}", gz, cz)]
    return run


for _op in INT_REDUCE.names:
    check(f"int_reduce:{_op}")(_int_reduce_check(_op))


@check("sort")
def _sort(data, pair):
    """Rows with ties (small integers), -0 beside +0, NaN and infinities, ascending and
    descending; rows long enough for the device's passes past its shared-memory block."""
    shape = data.draw(st.one_of(st.tuples(st.integers(0, 40), st.integers(0, 70)),
                                st.tuples(st.integers(1, 3), st.integers(1, 1 << 15))),
                      label="shape")
    if data.draw(st.booleans(), label="int32"):
        x = _int32s(data, shape, "x", st.integers(-3, 3) | st.integers(-2**31, 2**31 - 1))
    else:
        x = data.draw(dgst.arrays(shape, -3, 3, specials=dgst.ALL_SPECIALS),   # (bit keys)
                      label="x")
    descending = data.draw(st.booleans(), label="descending")
    (cv, ci), (gv, gi) = pair.twin("sort", _as_storage(x), descending)
    return [pair.agree("sort", gv, cv), pair.agree("sort", gi, ci)]


@check("searchsorted")
def _searchsorted(data, pair):
    """Rows sorted, with runs of ties (small integers), -0 beside +0, infinities and
    subnormals, or not sorted at all, or holding NaNs (both backends take PyTorch's steps,
    so the same index comes out); one row for all values or a row each; both sides."""
    rows = data.draw(st.integers(1, 6), label="rows")
    m = data.draw(st.integers(0, 70), label="row length")
    n = data.draw(st.integers(1, 50), label="values a row")
    shared = data.draw(st.booleans(), label="one row for all")
    shape = (1 if shared else rows, m)
    if data.draw(st.booleans(), label="int32"):
        small = st.integers(-4, 4) | st.integers(-2**31, 2**31 - 1)
        table = _int32s(data, shape, "sorted", small)
        values = _int32s(data, (rows, n), "values", small)
    else:
        specials = dgst.ALL_SPECIALS
        table = data.draw(dgst.arrays(shape, -3, 3, specials=specials), label="sorted")
        values = data.draw(dgst.arrays((rows, n), -3, 3, specials=specials), label="values")
    if data.draw(st.integers(0, 3), label="sorted (three in four)") > 0:
        table = np.sort(table, axis=-1)         # (NaNs last, as PyTorch's sort puts them)
    right = data.draw(st.booleans(), label="right")
    cz, gz = pair.twin("searchsorted", _as_storage(table), _as_storage(values), n, m, shared,
                       right)
    return [pair.agree("searchsorted", gz, cz)]


@check("cast")
def _cast(data, pair):
    shape = data.draw(dgst.shapes(), label="shape")
    source = data.draw(st.sampled_from(["float32", "int32", "bool"]), label="from")
    to = data.draw(st.sampled_from(["float32", "int32", "bool"]), label="to")
    if source == "bool":
        x = _bools(data, shape, "x")
    elif source == "int32":
        x = _int32s(data, shape, "x")
    else:
        x = data.draw(dgst.arrays(shape, -3e9, 3e9, specials=dgst.ALL_SPECIALS),  # (bits)
                      label="x")
    cz, gz = pair.twin("cast", _as_storage(x), np.dtype(to))
    return [pair.agree("cast", gz, cz)]


@check("convert16")
def _convert16(data, pair):
    """float32 to float16 / bfloat16 and back: values at, next to and halfway between
    neighbouring 16-bit values (ties to even) over the whole range, subnormals, overflow
    and the specials; and every kind of 16-bit pattern widened."""
    shape = data.draw(dgst.shapes(), label="shape")
    low = np.dtype(data.draw(st.sampled_from(["float16", "bfloat16"]), label="type"))
    n = int(np.prod(shape))
    bits = data.draw(hnp.arrays(np.uint16, n), label="bits")
    # offsets in float32 ULPs from a 16-bit value: 0, 1, just below, at and past the tie
    half = 0x1000 if low == np.float16 else 0x8000
    steps = np.array([0, 1, half - 1, half, half + 1, 2 * half - 1], np.uint32)
    pick = data.draw(hnp.arrays(np.uint8, n, elements=st.integers(0, len(steps) - 1)),
                     label="offsets")
    near = (bits.view(low).astype(F32).view(np.uint32) + steps[pick]).view(F32)
    drawn = data.draw(dgst.arrays(shape, -7e4, 7e4, specials=dgst.ALL_SPECIALS), label="x")
    x = np.where(data.draw(hnp.arrays(np.bool_, n), label="which").reshape(shape),
                 near.reshape(shape), drawn).astype(F32)
    cz, gz = pair.twin("cast", _as_storage(x), low)
    wz, wg = pair.twin("cast", _as_storage(bits.view(low).reshape(shape)), F32)
    return [pair.agree("convert16", gz, cz), pair.agree("convert16", wg, wz)]


def _scan_shape(data) -> tuple:
    """A shape for the scans: any small one, or up to 3 lines long enough for the chunked
    scan (and its recursion over the chunks' totals)."""
    return data.draw(st.one_of(dgst.shapes(min_dims=1, max_size=1 << 14),
                               st.tuples(st.integers(1, 3), st.integers(1, 1 << 20))
                               .filter(lambda s: s[0] * s[1] <= 1 << 20)), label="shape")


def _scan_lines(data, x) -> tuple:
    """((outer, n, inner) about a drawn axis, from the end or not), and that axis."""
    dim = data.draw(st.integers(0, x.ndim - 1), label="dim")
    reverse = data.draw(st.booleans(), label="reverse")
    lines = (int(np.prod(x.shape[:dim])), x.shape[dim], int(np.prod(x.shape[dim + 1:])))
    return lines, reverse, dim


def _from(a: np.ndarray, dim: int, reverse: bool, running) -> np.ndarray:
    """``running`` (np.cumsum or np.cumprod) of float64 a along dim, from the end or not."""
    wide = np.flip(a, dim) if reverse else a
    out = running(wide.astype(np.float64), dim)
    return np.flip(out, dim) if reverse else out


@check("cumsum")
def _cumsum(data, pair):
    """Along one axis, forward and from the end; lines long enough for the chunked scan
    (and its recursion over the chunk totals) as well as short and strided ones."""
    x = data.draw(dgst.arrays(_scan_shape(data)), label="x")
    lines, reverse, dim = _scan_lines(data, x)
    cy, gy = pair.twin("cumsum", x, *lines, reverse)
    return [pair.agree("cumsum", gy, cy, scale=_from(np.abs(x), dim, reverse, np.cumsum),
                       length=lines[1])]


@check("cumprod")
def _cumprod(data, pair):
    """As cumsum's, with factors near 1 (so that long lines neither overflow nor
    underflow, where the order of the device's chunks would decide where a product first
    does), a few of them 0, -0, -1 or 2."""
    near = 1.0 + data.draw(dgst.arrays(_scan_shape(data), -2.0 ** -9, 2.0 ** -9,
                                       specials=False), label="x - 1")
    odd = data.draw(st.lists(st.tuples(st.integers(0, max(near.size - 1, 0)),
                                       st.sampled_from([0.0, -0.0, -1.0, 2.0])),
                             max_size=4), label="odd factors")
    flat = near.reshape(-1)
    for at, v in odd:
        if flat.size:
            flat[at] = v
    x = flat.reshape(near.shape).astype(F32)
    lines, reverse, dim = _scan_lines(data, x)
    cy, gy = pair.twin("cumprod", x, *lines, reverse)
    scale = np.abs(_from(x, dim, reverse, np.cumprod))
    return [pair.agree("cumprod", gy, cy, scale=scale, length=lines[1])]


def _int_scan_check(op: str, elements):
    def run(data, pair):
        """int32 lines of the float checks' shapes (wrapping past int32's range), forward
        and from the end."""
        x = _int32s(data, _scan_shape(data), "x", elements)
        lines, reverse, _ = _scan_lines(data, x)
        cz, gz = pair.twin(op, _as_storage(x), *lines, reverse)
        return [pair.agree(f"{op}:int32", gz, cz)]
    return run


for _op, _elements in (("cumsum", INT32_RANGE), ("cumprod", st.integers(-5, 5))):
    check(f"{_op}:int32")(_int_scan_check(_op, _elements))


@check("permute")
def _permute(data, pair):
    x = data.draw(dgst.arrays(dgst.shapes(), specials=dgst.ALL_SPECIALS),   # (moves ints:
                  label="x")                                              # subnormals too)
    axes = tuple(data.draw(st.permutations(range(x.ndim)), label="axes"))
    cy, gy = pair.twin("permute", x, axes)
    return [pair.agree("permute", gy, cy)]


@check("strided")
def _strided(data, pair):
    x = data.draw(dgst.arrays(dgst.shapes(min_dims=1), specials=dgst.ALL_SPECIALS),  # (ints)
                  label="x")
    # a slice per axis: start, step (negative too) and count within the axis
    contiguous = np.cumprod((1,) + x.shape[:0:-1])[::-1]
    shape, strides, offset = [], [], 0
    for n, stride in zip(x.shape, contiguous):
        if n == 0:
            shape.append(0)
            strides.append(int(stride))
            continue
        start = data.draw(st.integers(0, n - 1))
        step = data.draw(st.sampled_from([1, 2, 3, -1, -2]))
        room = start // -step + 1 if step < 0 else (n - 1 - start) // step + 1
        shape.append(data.draw(st.integers(0, room)))
        strides.append(int(step * stride))
        offset += start * int(stride)
    cy, gy = pair.twin("strided", x, tuple(shape), tuple(strides), offset)
    g = data.draw(dgst.arrays(tuple(shape)), label="g")
    # into zeros it makes, or (concatenation) into given storage, the rest left as it was
    into = data.draw(st.booleans(), label="into given storage")
    out = data.draw(dgst.arrays((x.size,)), label="out") if into else None
    cg, gg = pair.twin("strided_backward", g, x.size, tuple(strides), offset, out)
    return [pair.agree("strided", gy, cy), pair.agree("strided_backward", gg, cg)]


def _matmul_operands(data):
    """(a, b, trans_a, trans_b): any sizes up to past a tile, batched or not."""
    dims = st.one_of(st.integers(0, 70), st.sampled_from(dgst.EDGE_SIZES[:9]))
    m, k, n = (data.draw(dims, label=name) for name in "mkn")
    batch_a, batch_b = data.draw(st.sampled_from([((), ()), ((3,), (3,)), ((3,), ()),
                                                  ((), (3,))]), label="batches")
    trans_a, trans_b = data.draw(st.booleans(), label="trans_a"), data.draw(st.booleans(),
                                                                             label="trans_b")
    a = data.draw(dgst.arrays(batch_a + (m, k)), label="a")
    b = data.draw(dgst.arrays(batch_b + (k, n)), label="b")
    return a, b, trans_a, trans_b


@check("matmul")
def _matmul(data, pair):
    return [_matmul_agreement(pair, *_matmul_operands(data))]


@check("matmul:edge tiles")
def _matmul_edge_tiles(data, pair):
    """M and N a few quads past whole tiles (of the sides the planner cuts: 128 or 256
    rows, 64 or 128 columns) and K in whole steps: the kernel whose inner tiles skip the
    bounds tests that its edge tiles make (matmul_edges.comp), which sizes drawn freely
    rarely reach."""
    past = st.integers(1, 9)
    m = data.draw(st.sampled_from([128, 256]), label="m") + 4 * data.draw(past)
    n = data.draw(st.sampled_from([64, 128]), label="n") + 4 * data.draw(past)
    k = data.draw(st.sampled_from([64, 128, 256]), label="k")
    trans_a, trans_b = data.draw(st.booleans(), label="trans_a"), data.draw(st.booleans(),
                                                                             label="trans_b")
    a = data.draw(dgst.arrays((m, k)), label="a")
    b = data.draw(dgst.arrays((k, n)), label="b")
    return [_matmul_agreement(pair, a, b, trans_a, trans_b)]


@check("matmul:bias")
def _matmul_bias(data, pair):
    """The product plus a bias per output column (a linear layer's forward)."""
    a, b, trans_a, trans_b = _matmul_operands(data)
    bias = data.draw(dgst.arrays((b.shape[-1],)), label="bias")
    return [_matmul_agreement(pair, a, b, trans_a, trans_b, bias)]


@check("matmul:relu")
def _matmul_relu(data, pair):
    """The product plus a bias, then relu, in one kernel (a linear layer and its ReLU)."""
    a, b, trans_a, trans_b = _matmul_operands(data)
    bias = data.draw(dgst.arrays((b.shape[-1],)), label="bias")
    return [_matmul_agreement(pair, a, b, trans_a, trans_b, bias, relu=True)]


@check("matmul:mask")
def _matmul_mask(data, pair):
    """The product kept where a mask of its shape is > 0, else 0, in one kernel (the
    gradient a linear layer hands back through the ReLU below it)."""
    a, b, trans_a, trans_b = _matmul_operands(data)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    mask = data.draw(dgst.arrays(shape, specials=pair.specials(dgst.ALL_SPECIALS)),
                     label="mask")
    return [_matmul_agreement(pair, a, b, trans_a, trans_b, mask=mask)]


@check("matmul:sums")
def _matmul_sums(data, pair):
    """The product and, written beside it, op(a)'s row sums (a linear layer's weight and
    bias gradients in one kernel, op(a) = g^T): each agrees as its own primitive would."""
    a, b, trans_a, trans_b = _matmul_operands(data)
    return matmul_sums_agreement(pair, a, b, trans_a, trans_b)


def matmul_sums_agreement(pair, a, b, trans_a, trans_b) -> list:
    """[the product's agreement, the row sums'] for operands op(a), op(b) stored transposed
    where asked (also the tile tests' check of every way the sums are made)."""
    a_st = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_st = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    results = []
    for backend in (pair.ref, pair.dut):
        sums = backend.empty(a.shape[:-1], np.dtype(np.float32))
        product = backend.matmul(backend.upload(a_st), backend.upload(b_st), trans_a, trans_b,
                                 epilogue=Epilogue(row_sums=sums))
        results.append((backend.download(product), backend.download(sums)))
    (cc, cs), (gc, gs) = results
    return [pair.agree("matmul", gc, cc, scale=product_scale(a, b), length=a.shape[-1]),
            pair.agree("reduce:sum", gs, cs, scale=np.abs(a.astype(np.float64)).sum(-1),
                       length=a.shape[-1])]


def _matmul_agreement(pair, a, b, trans_a, trans_b, bias=None, relu=False, mask=None,
                      low=None, stored=(False, False), result=False):
    # Operands are stored transposed where asked, so op(a) @ op(b) is the same product;
    # ``stored``: a, b stored in ``low``'s type (rounded so), as autocast's 16-bit operands;
    # ``result``: the product stored in it too (each output rounded once by each backend).
    a_st = np.ascontiguousarray(np.swapaxes(a, -1, -2)) if trans_a else a
    b_st = np.ascontiguousarray(np.swapaxes(b, -1, -2)) if trans_b else b
    with np.errstate(over="ignore"):
        a_st, b_st = (x.astype(low) if keep else x for x, keep in zip((a_st, b_st), stored))
    cc, gc = (c.astype(F32) for c in pair.twin(
        "matmul", a_st, b_st, trans_a, trans_b, None, Epilogue(bias=bias, relu=relu,
                                                               mask=mask), low,
        low if result else None))
    a, b = rounded(low, a, b)    # (the bound is over the operands the product multiplies)
    # An operand rounded to inf makes inf * 0 = NaN in the scale: a NaN bound, which allows
    # no difference (tolerances.py), so numpy's warning says nothing.
    with np.errstate(invalid="ignore"):
        scale = (product_scale(a, b) if low is None else
                 np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))))
    if mask is not None:
        return pair.agree("matmul:mask", gc, cc, scale=scale, length=a.shape[-1])
    if bias is None:
        key = "matmul" if low is None else "matmul:autocast" + (f"@{low}" if result else "")
        return pair.agree(key, gc, cc, scale=scale, length=a.shape[-1])
    key = ("matmul:relu" if relu else "matmul:bias") if low is None else (
        "matmul:bias:autocast" + (f"@{low}" if result else ""))
    return pair.agree(key, gc, cc, scale=scale + np.abs(bias.astype(np.float64)),
                      length=a.shape[-1])


@contextlib.contextmanager
def tensor_cores_forced(backend):
    """Within it, ``backend`` runs every matmul its tensor-core kernel can run (whole 16 x 16
    output blocks) on that kernel, however small the product; on a backend without tensor
    cores nothing changes. Yields whether they are used."""
    from ..gpu import plans
    if not getattr(getattr(backend, "ctx", None), "tensor_cores", False):
        yield False
        return
    natural = plans.matmul_plan

    def plan(m, n, k, batch, shared=48 << 10, threads=1024, *rest):
        tile = plans.tensor_tile(shared, threads)
        if m % 16 == 0 and n % 16 == 0 and tile is not None:
            return plans.MatmulPlan(tile, 1, k)
        return natural(m, n, k, batch, shared, threads, *rest)
    plans.matmul_plan = plan
    try:
        yield True
    finally:
        plans.matmul_plan = natural


@check("matmul:tensor")
def _matmul_tensor(data, pair):
    """matmul on the gpu's tensor cores where it has them (elsewhere its own plan): M and N
    whole 16 x 16 blocks, K past the 248 the bound needs, and in some rows values far
    from the others (below 2^-100, 2^63 or more), which the float16 split scales with
    their row and leaves below its floor, and the bfloat16 one sends to the exact path."""
    m, n = (16 * data.draw(st.integers(1, 12), label=f"{name}/16") for name in "mn")
    k = data.draw(st.integers(256, 420), label="k")
    batch_a, batch_b = data.draw(st.sampled_from([((), ()), ((2,), (2,)), ((2,), ())]),
                                 label="batches")
    trans_a, trans_b = data.draw(st.booleans(), label="trans_a"), data.draw(st.booleans(),
                                                                             label="trans_b")
    unsplittable = (1e-35, -2.0 ** 70, 2.0 ** 63)
    a = data.draw(dgst.arrays(batch_a + (m, k), specials=unsplittable, max_specials=2),
                  label="a")
    b = data.draw(dgst.arrays(batch_b + (k, n), specials=unsplittable, max_specials=2),
                  label="b")
    with tensor_cores_forced(pair.dut):
        return [_matmul_agreement(pair, a, b, trans_a, trans_b)]


@check("matmul:autocast", samples=True)
def _matmul_autocast(data, pair):
    """The product of operands rounded to bfloat16 or float16 (autocast's), accumulated in
    float32; both backends round the same way (convert16), so the product's bound holds.
    Either operand may come stored in the type (an activation autocast made); the product
    is compared as float32 and stored in the type (the op's result:
    ``matmul:autocast@<type>``) each example."""
    low = np.dtype(data.draw(st.sampled_from(["bfloat16", "float16"]), label="type"))
    stored = data.draw(st.tuples(st.booleans(), st.booleans()), label="stored")
    a, b, trans_a, trans_b = _matmul_operands(data)
    return [_matmul_agreement(pair, a, b, trans_a, trans_b, low=low, stored=stored,
                              result=result) for result in (False, True)]


@check("matmul:bias:autocast", samples=True)
def _matmul_bias_autocast(data, pair):
    """A linear layer's forward under autocast: the rounded operands' product plus a bias,
    with a relu or not, its result float32 and stored in the type (rounded once after the
    bias and the relu), both forms each example."""
    low = np.dtype(data.draw(st.sampled_from(["bfloat16", "float16"]), label="type"))
    stored = data.draw(st.tuples(st.booleans(), st.booleans()), label="stored")
    a, b, trans_a, trans_b = _matmul_operands(data)
    bias = data.draw(dgst.arrays((b.shape[-1],)), label="bias")
    relu = data.draw(st.booleans(), label="relu")
    return [_matmul_agreement(pair, a, b, trans_a, trans_b, bias=bias, relu=relu, low=low,
                              stored=stored, result=result) for result in (False, True)]


@check("matmul:autocast tensor cores", samples=True)
def _matmul_autocast_tensor(data, pair):
    """The rounded operands' product on the tensor cores where the gpu has them (bfloat16:
    one piece of each operand, float16: three; the tiles with values the split cannot take,
    by rounded fmas); operands and product stored in the type or not, the product with a
    bias and a relu or not (which the kernel makes as it stores a 16-bit product)."""
    m, n = (16 * data.draw(st.integers(1, 12), label=f"{name}/16") for name in "mn")
    k = data.draw(st.integers(256, 420), label="k")
    trans_a, trans_b = data.draw(st.booleans(), label="trans_a"), data.draw(st.booleans(),
                                                                             label="trans_b")
    unsplittable = (1e-35, -2.0 ** 70, 2.0 ** 63)
    a = data.draw(dgst.arrays((m, k), specials=unsplittable, max_specials=2), label="a")
    b = data.draw(dgst.arrays((k, n), specials=unsplittable, max_specials=2), label="b")
    low = np.dtype(data.draw(st.sampled_from(["bfloat16", "float16"]), label="type"))
    stored = data.draw(st.tuples(st.booleans(), st.booleans()), label="stored")
    result = data.draw(st.booleans(), label="result")
    bias = relu = None
    if data.draw(st.booleans(), label="with a bias"):
        bias = data.draw(dgst.arrays((n,)), label="bias")
        relu = data.draw(st.booleans(), label="relu")
    with tensor_cores_forced(pair.dut):
        return [_matmul_agreement(pair, a, b, trans_a, trans_b, bias=bias, relu=bool(relu),
                                  low=low, stored=stored, result=result)]


# -- softmax family -----------------------------------------------------------------------------
def _rows(data, max_n=600):
    rows = data.draw(st.one_of(st.integers(1, 40), st.sampled_from([255, 257, 1000])),
                     label="rows")
    n = data.draw(st.one_of(st.integers(1, 40), st.sampled_from([255, 256, 257, max_n])),
                  label="n")
    return rows, n


def _softmax_check(kind):
    def run(data, pair):
        rows, n = _rows(data)
        x = data.draw(dgst.arrays((rows, n), -8.0, 8.0), label="x")
        g = data.draw(dgst.arrays((rows, n)), label="g")
        spread = x.astype(np.float64) - x.max(axis=1, keepdims=True)
        cy, gy = pair.twin(kind, x)
        if kind == "softmax":
            scale = np.abs(cy.astype(np.float64))
        else:
            scale = np.broadcast_to(np.abs(np.log(np.exp(spread).sum(axis=1, keepdims=True))),
                                    cy.shape)
        cg, gg = pair.twin(f"{kind}_backward", cy, g)
        y = cy.astype(np.float64)
        if kind == "log_softmax":      # the table's S for g - exp(y) sum(g)
            mag = np.exp(y) * np.sum(np.abs(g), axis=1, keepdims=True) * (1 + np.abs(y))
        else:                          # y (g - sum(g y))
            mag = np.abs(y) * np.sum(np.abs(g * y), axis=1, keepdims=True)
        mag = mag + np.abs(g)
        return [pair.agree(kind, gy, cy, x=spread, scale=scale, length=n),
                pair.agree(f"{kind}_backward", gg, cg, scale=mag, length=n)]
    return run


for _kind in ("softmax", "log_softmax"):
    check(_kind)(_softmax_check(_kind))


@check("softmax_cross_entropy")
def _softmax_cross_entropy(data, pair):
    rows, n = _rows(data, max_n=1000)
    x = data.draw(dgst.arrays((rows, n), -6.0, 6.0), label="logits")
    t = data.draw(dgst.index_arrays((rows,), n), label="targets")
    (cl, cstats), (gl, gstats) = pair.twin("softmax_cross_entropy", x, t)
    # each row's max and log sum, compared as their log-sum-exp
    clse, glse = (s[:, 0].astype(np.float64) + s[:, 1] for s in (cstats, gstats))
    per_row = np.abs(clse) + np.abs(x[np.arange(rows), t])
    g = np.array(data.draw(st.floats(-4, 4, width=32), label="g"), F32)
    cd, gd = pair.twin("softmax_cross_entropy_backward", x, t, cstats, g)
    unit = []                   # the forward's gradient for dL/dloss = 1 (its grad output)
    for backend in (pair.ref, pair.dut):
        grad = backend.empty(x.shape, np.dtype(F32))
        backend.softmax_cross_entropy(backend.upload(x), backend.indices(t), grad)
        unit.append(backend.download(grad))
    return [pair.agree("softmax_cross_entropy", glse, clse, scale=np.abs(clse), length=n),
            pair.agree("softmax_cross_entropy", gl, cl, scale=per_row.mean(), length=n + rows),
            pair.agree("softmax_cross_entropy_backward", gd, cd,
                       x=x.astype(np.float64) - clse[:, None]),
            pair.agree("softmax_cross_entropy_backward", unit[1], unit[0],
                       x=x.astype(np.float64) - clse[:, None])]


# -- layers ---------------------------------------------------------------------------------------
@check("layer_norm")
def _layer_norm(data, pair):
    rows, n = _rows(data, max_n=1500)   # (rows past 1024 take the gpu's workgroup form)
    shift = data.draw(st.sampled_from([0.0, 1.5, 100.0]), label="shift")
    x = data.draw(dgst.arrays((rows, n)), label="x") + F32(shift)
    gamma = data.draw(dgst.arrays((n,)), label="gamma")
    beta = data.draw(st.none() | dgst.arrays((n,)), label="beta")     # (None: no shift)
    g = data.draw(dgst.arrays((rows, n)), label="g")
    (cy, cm, cr), (gy, gm, gr) = pair.twin("layer_norm", x, gamma, beta, 1e-5)
    xhat = np.abs((x - cm[:, None]) * cr[:, None]).astype(np.float64)
    # the mean errs by gamma(n) mean|x|, which shifts every xhat by that times rstd
    shift = (np.abs(x).mean(axis=1) * cr)[:, None].astype(np.float64)
    scale = (xhat * n + shift) * np.abs(gamma) + (0.0 if beta is None else np.abs(beta))
    (cdx, cdg, cdb), (gdx, gdg, gdb) = pair.twin("layer_norm_backward", x, gamma, cm, cr, g)
    row = np.sum(np.abs(g * gamma), axis=1, keepdims=True) * cr[:, None] * (1 + xhat + shift)
    col = np.sum(np.abs(g) * (1 + xhat + shift), axis=0)
    return [pair.agree("layer_norm", gy, cy, scale=scale, length=n),
            pair.agree("layer_norm", gm, cm, scale=np.abs(x).mean(axis=1), length=n),
            pair.agree("layer_norm", gr, cr, scale=cr * n, length=n),
            pair.agree("layer_norm_backward", gdx, cdx, scale=row, length=n),
            pair.agree("layer_norm_backward", gdg, cdg, scale=col, length=rows),
            pair.agree("layer_norm_backward", gdb, cdb, scale=col, length=rows)]


@check("embedding")
def _embedding(data, pair):
    num, dim = data.draw(st.integers(1, 300), label="rows"), data.draw(st.integers(1, 70),
                                                                        label="dim")
    table = data.draw(dgst.arrays((num, dim), specials=dgst.ALL_SPECIALS),   # (bits move)
                      label="table")
    idx = data.draw(dgst.index_arrays(dgst.shapes(1, 2, max_side=30), num), label="indices")
    moved = []
    if data.draw(st.booleans(), label="int32 table"):
        ci, gi = pair.twin("embedding", _as_storage(_int32s(data, (num, dim), "ints")), idx)
        moved.append(pair.agree("embedding", gi, ci))
    cy, gy = pair.twin("embedding", table, idx)
    g = data.draw(dgst.arrays(idx.shape + (dim,)), label="g")
    cg, gg = pair.twin("embedding_backward", idx, g, num)
    counts = np.bincount(idx.reshape(-1), minlength=num)[:, None]
    scale = np.zeros((num, dim))
    np.add.at(scale, idx.reshape(-1), np.abs(g.reshape(-1, dim)))
    return moved + [pair.agree("embedding", gy, cy),
                    pair.agree("embedding_backward", gg, cg, scale=scale,
                               length=np.maximum(counts, 1))]


@check("gather")
def _gather(data, pair):
    rows, cols = data.draw(st.integers(0, 200), label="rows"), data.draw(st.integers(1, 70),
                                                                        label="cols")
    k = data.draw(st.integers(0, 2 * cols), label="k")      # repeats are common past cols
    shared = data.draw(st.booleans(), label="one shared row")
    if data.draw(st.booleans(), label="int32"):     # (small ones: subnormal bit patterns)
        x = _int32s(data, (1 if shared else rows, cols), "x")
    else:
        x = data.draw(dgst.arrays((1 if shared else rows, cols),
                                  specials=pair.specials(dgst.ALL_SPECIALS)), label="x")
    idx = data.draw(dgst.index_arrays((rows, k), cols), label="indices")
    skip = data.draw(st.sampled_from([-100, 0, cols - 1]), label="skip")
    cy, gy = pair.twin("gather", _as_storage(x), idx, skip)
    g = data.draw(dgst.arrays((rows, k)), label="g")
    cg, gg = pair.twin("gather_backward", idx, g, cols, skip)
    return [pair.agree("gather", gy, cy), pair.agree("gather_backward", gg, cg)]


def _windows(data, pair) -> tuple:
    """Images and a window geometry of every kind: kernels, dilations, strides and paddings
    (past the kernel too, as a transposed convolution's). (x, size, geometry)."""
    b, c = data.draw(st.integers(1, 3), label="batch"), data.draw(st.integers(1, 4),
                                                                  label="channels")
    size = data.draw(st.tuples(st.integers(1, 12), st.integers(1, 12)), label="size")
    kernel = data.draw(st.tuples(st.integers(1, 4), st.integers(1, 4)), label="kernel")
    dilation = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)), label="dilation")
    stride = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)), label="stride")
    padding = data.draw(st.tuples(st.integers(0, 4), st.integers(0, 4)), label="padding")
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, p, d, k, s in zip(size, padding, dilation, kernel, stride))
    assume(min(out) >= 1)
    x = data.draw(dgst.arrays((b, c) + size, specials=pair.specials(dgst.ALL_SPECIALS)),
                  label="x")
    return x, size, (kernel, dilation, padding, stride, out)


@check("unfold")
def _unfold(data, pair):
    x, _, geometry = _windows(data, pair)
    value = data.draw(st.sampled_from([0.0, -math.inf]), label="value")
    cy, gy = pair.twin("unfold", x, *geometry, value)
    return [pair.agree("unfold", gy, cy)]


@check("fold")
def _fold(data, pair):
    x, size, geometry = _windows(data, pair)
    cols = data.draw(dgst.arrays(pair.ref.unfold(x, *geometry, 0.0).shape,
                                 specials=pair.specials(dgst.ALL_SPECIALS)), label="cols")
    cx, gx = pair.twin("fold", cols, size, *geometry)
    return [pair.agree("fold", gx, cx)]


def _conv_operands(data, pair) -> tuple:
    """(x, weight, g, geometry, low) of a convolution: any window geometry, the padding
    negative too (an input gradient's windows), few or many channels (tiles of the product
    whole and at the edges, K whole steps or not), operands rounded to a 16-bit type at
    times (autocast's)."""
    x, size, (kernel, dilation, _, stride, _) = _windows(data, pair)
    padding = data.draw(st.tuples(st.integers(-2, 4), st.integers(-2, 4)),
                        label="padding (negative too)")
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, p, d, k, s in zip(size, padding, dilation, kernel, stride))
    assume(min(out) >= 1)
    if data.draw(st.booleans(), label="many channels"):
        b, c = data.draw(st.integers(1, 4), label="batch"), data.draw(st.integers(8, 40),
                                                                      label="channels")
        x = data.draw(dgst.arrays((b, c) + size), label="x")
    o = data.draw(st.one_of(st.integers(1, 9), st.integers(60, 140)), label="out channels")
    weight = data.draw(dgst.arrays((o, x.shape[1]) + kernel), label="weight")
    g = data.draw(dgst.arrays((x.shape[0], o) + out), label="g")
    low = data.draw(st.sampled_from([None, None, "bfloat16", "float16"]), label="low")
    return x, weight, g, (dilation, padding, stride, out, kernel), low


@check("conv2d")
def _conv2d(data, pair):
    """conv2d and conv2d_weight against the product of the weight and the windows: the
    bound of a product over each output's K window elements (or images and windows)."""
    x, weight, g, (dilation, padding, stride, out, kernel), low = _conv_operands(data, pair)
    low = None if low is None else np.dtype(low)
    cy, gy = pair.twin("conv2d", x, weight, dilation, padding, stride, out, low)
    cw, gw = pair.twin("conv2d_weight", x, g, kernel, dilation, padding, stride, low)
    x, weight, g = rounded(low, x, weight, g)   # (the bound is over what is multiplied)
    cols, scale_y = _window_bound(pair, x, weight, (kernel, dilation, padding, stride, out))
    g3 = np.abs(g.reshape(g.shape[0], weight.shape[0], -1).astype(np.float64))
    with np.errstate(invalid="ignore"):        # (inf times 0 in the bounds: NaN, no bound)
        scale_w = np.tensordot(g3, cols, axes=([0, 2], [0, 2]))
    return [pair.agree("conv2d", gy, cy, scale=scale_y.reshape(cy.shape),
                       length=cols.shape[1]),
            pair.agree("conv2d", gw, cw, scale=scale_w.reshape(cw.shape),
                       length=g3.shape[0] * g3.shape[2])]


@check("conv2d_input")
def _conv2d_input(data, pair):
    """conv2d_input against the sum of each pixel's O kh kw terms (g times the weight
    elements of the windows that read it): the bound of a product over them."""
    x, size, (kernel, dilation, padding, stride, out) = _windows(data, pair)
    b, c = x.shape[:2]
    if data.draw(st.booleans(), label="many channels"):
        c = data.draw(st.integers(8, 40), label="channels")
    o = data.draw(st.one_of(st.integers(1, 9), st.integers(60, 140)), label="out channels")
    weight = data.draw(dgst.arrays((o, c) + kernel), label="weight")
    g = data.draw(dgst.arrays((b, o) + out), label="g")
    low = data.draw(st.sampled_from([None, None, "bfloat16", "float16"]), label="low")
    low = None if low is None else np.dtype(low)
    cx, gx = pair.twin("conv2d_input", g, weight, size, dilation, padding, stride, low)
    g, weight = rounded(low, g, weight)
    terms = np.matmul(np.abs(weight.reshape(o, -1).astype(np.float64)).T,
                      np.abs(g.reshape(b, o, -1).astype(np.float64)))
    scale = pair.ref.fold(terms, size, kernel, dilation, padding, stride, out)
    return [pair.agree("conv2d", gx, cx, scale=scale,
                       length=o * kernel[0] * kernel[1])]


def _window_bound(pair, x, weight, geometry) -> tuple:
    """(|windows| (B, C kh kw, L), S = |W| @ |windows|) of a convolution of x with weight
    over ``geometry`` (kernel, dilation, padding, stride, out), in float64."""
    cols = np.abs(pair.ref.unfold(x.astype(np.float64), *geometry, 0.0))
    with np.errstate(invalid="ignore"):        # (inf times 0 in the bounds: NaN, no bound)
        scale = np.matmul(np.abs(weight.reshape(weight.shape[0], -1).astype(np.float64)),
                          cols)
    return cols, scale


def _conv_blocks(data, pair) -> tuple:
    """(x, weight, padding, out) of a convolution the tensor cores can run (out channels
    and windows whole 16 x 16 blocks); values the split cannot take at times (their tiles
    again by fmas)."""
    b, c = data.draw(st.integers(1, 3), label="batch"), data.draw(st.integers(1, 40),
                                                                  label="channels")
    kernel = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)), label="kernel")
    out = (data.draw(st.integers(1, 6), label="rows of windows"),
           16 * data.draw(st.integers(1, 3), label="windows a row / 16"))
    padding = data.draw(st.tuples(st.integers(-1, 2), st.integers(-1, 2)), label="padding")
    size = tuple(n - 2 * p + k - 1 for n, p, k in zip(out, padding, kernel))
    assume(min(size) >= 1)
    o = 16 * data.draw(st.integers(1, 5), label="out channels / 16")
    unsplittable = (1e-35, -2.0 ** 70, math.inf, math.nan)
    x = data.draw(dgst.arrays((b, c) + size, specials=unsplittable, max_specials=2),
                  label="x")
    return x, data.draw(dgst.arrays((o, c) + kernel), label="weight"), padding, out


def _conv_blocks_agreement(pair, key, x, weight, padding, out, low=None):
    """conv2d (stride and dilation 1) with the tensor cores forced where the gpu has them:
    the windows split into pieces as they are loaded (one piece: operands rounded to
    bfloat16)."""
    with tensor_cores_forced(pair.dut):
        cy, gy = pair.twin("conv2d", x, weight, (1, 1), padding, (1, 1), out, low)
    x, weight = rounded(low, x, weight)
    cols, scale = _window_bound(pair, x, weight, (weight.shape[2:], (1, 1), padding, (1, 1),
                                                  out))
    return pair.agree(key, gy, cy, scale=scale.reshape(cy.shape), length=cols.shape[1])


@check("conv2d:tensor cores")
def _conv2d_tensor(data, pair):
    """Float32-accurate conv2d on the tensor cores (three pieces a value)."""
    return [_conv_blocks_agreement(pair, "conv2d", *_conv_blocks(data, pair))]


@check("conv2d:autocast")
def _conv2d_autocast(data, pair):
    """conv2d of operands rounded to bfloat16 on the tensor cores (one piece; the running
    sum through them) or, on a gpu without, by the fma kernel."""
    return [_conv_blocks_agreement(pair, "conv2d:autocast", *_conv_blocks(data, pair),
                                   low=np.dtype("bfloat16"))]


@check("max_pool")
def _max_pool(data, pair):
    """Ties, NaNs, infinities and signed zeros among the specials."""
    x, _, geometry = _windows(data, pair)
    cm, gm = pair.twin("max_pool", x, *geometry)
    return [pair.agree("max_pool", gm, cm)]


def _attention_terms(q, k, v, causal, scale):
    """Float64 (weights p, their logits less lse x, the dots' term magnitudes A, lse) of
    attention: each weight's error is within about (D A + 2|x| + 3) ULP."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = scale * q @ np.swapaxes(k, -1, -2)
    a = abs(scale) * np.abs(q) @ np.swapaxes(np.abs(k), -1, -2)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    lse = m + np.log(np.exp(s - m).sum(-1, keepdims=True))
    p = np.exp(s - lse)
    x = np.where(p > 0, np.abs(s - m), 0.0)
    return p, 1.0 + a + x, lse[..., 0]


def _attention_agreements(pair, q, k, v, g, causal, scale, got, ref) -> list:
    """The agreements of a fused attention's forward and backward, as rows (B, L, D): ``got``
    and ``ref`` (the reference's) are (o, lse, dq, dk, dv), the gradients of the output
    gradient ``g`` at the reference's o."""
    (go, gl, *gg), (co, cl, *cg) = got, ref
    p, cond, lse = _attention_terms(q, k, v, causal, scale)
    head, rows, keys = q.shape[-1], q.shape[-2], k.shape[-2]
    n = head + keys + 8
    out = [pair.agree("attention", go, co, scale=(p * cond) @ np.abs(v), length=n),
           pair.agree("attention", gl, cl, scale=np.abs(lse) + cond.max(-1), length=n)]
    g64, v64, o64 = g.astype(np.float64), v.astype(np.float64), co.astype(np.float64)
    dp = g64 @ np.swapaxes(v64, -1, -2)
    delta = (g64 * o64).sum(-1, keepdims=True)
    slack = np.abs(g64) @ np.swapaxes(np.abs(v64), -1, -2) + (np.abs(g64) * np.abs(o64)).sum(
        -1, keepdims=True)
    ds = abs(scale) * p * (np.abs(dp - delta) * cond + slack)
    scales = (ds @ np.abs(k), np.swapaxes(ds, -1, -2) @ np.abs(q),
              np.swapaxes(p * cond, -1, -2) @ np.abs(g64))
    for a, b, sc, length in zip(gg, cg, scales, (head + keys, head + rows, head + rows)):
        out.append(pair.agree("attention_backward", a, b, scale=sc, length=length + 8))
    return out


@check("attention")
def _attention(data, pair):
    """The fused attention and its backward: heads of every length up to the kernels' 128,
    short and long rows (several shared-memory tiles), causal or not."""
    b = data.draw(st.integers(1, 3), label="batch")
    rows, keys = (data.draw(st.integers(1, 80), label=n) for n in ("L", "S"))
    head = data.draw(st.sampled_from([1, 3, 8, 16, 32, 64, 100, 128]), label="head")
    causal = data.draw(st.booleans(), label="causal")
    scale = data.draw(st.sampled_from([1.0 / math.sqrt(head), 0.05, 1.0]), label="scale")
    q, k, v = (data.draw(dgst.arrays((b, n, head), -2.0, 2.0), label=name)
               for name, n in (("q", rows), ("k", keys), ("v", keys)))
    (co, cl), (go, gl) = pair.twin("attention", q, k, v, causal, scale)
    g = data.draw(dgst.arrays((b, rows, head)), label="g")
    cg, gg = pair.twin("attention_backward", q, k, v, co, cl, g, causal, scale)
    return _attention_agreements(pair, q, k, v, g, causal, scale, (go, gl, *gg),
                                 (co, cl, *cg))


@check("attention_packed")
def _attention_packed(data, pair):
    """Self-attention read in place from a projection (N, L, 3, heads, D): the same bounds
    as ``attention``'s, on its rows (N * heads, L, D); heads of the tiled kernels' 64 among
    the lengths, so their strided rows are held to the reference too."""
    n = data.draw(st.integers(1, 2), label="N")
    heads = data.draw(st.integers(1, 3), label="heads")
    rows = data.draw(st.integers(1, 70), label="L")
    head = data.draw(st.sampled_from([1, 3, 8, 32, 64, 64, 100]), label="head")
    causal = data.draw(st.booleans(), label="causal")
    scale = 1.0 / math.sqrt(head)
    qkv = data.draw(dgst.arrays((n, rows, 3, heads, head), -2.0, 2.0), label="qkv")
    (co, cl), (go, gl) = pair.twin("attention_packed", qkv, heads, causal, scale)
    g = data.draw(dgst.arrays((n, rows, heads, head)), label="g")
    cg, gg = pair.twin("attention_packed_backward", qkv, co, cl, g, heads, causal, scale)

    def rows_of(x):                     # (N, L, H, D) -> (N * H, L, D)
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3)).reshape(n * heads, rows, head)
    q, k, v = (rows_of(qkv[:, :, i]) for i in range(3))
    return _attention_agreements(
        pair, q, k, v, rows_of(g), causal, scale,
        (rows_of(go), gl, *(rows_of(gg[:, :, i]) for i in range(3))),
        (rows_of(co), cl, *(rows_of(cg[:, :, i]) for i in range(3))))


@check("dropout")
def _dropout(data, pair):
    x = data.draw(dgst.arrays(dgst.shapes(max_size=1 << 16),
                              specials=pair.specials(dgst.ALL_SPECIALS)), label="x")
    p = data.draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), label="p")
    seed = data.draw(st.integers(0, 2 ** 64 - 1), label="seed")
    step = data.draw(st.integers(0, 2 ** 40), label="step")
    cy, gy = pair.twin("dropout", x, p, seed, step)
    return [pair.agree("dropout", gy, cy)]


# -- optimizers -------------------------------------------------------------------------------------
# Each rule's scalars come from its optimizer class's own ``_hyper``, over hyperparameters
# drawn here, so the check exercises what training passes.
_OPTIMIZERS = {"adam": "Adam", "sgd": "SGD", "rmsprop": "RMSprop", "adagrad": "Adagrad",
               "adamax": "Adamax", "nadam": "NAdam", "radam": "RAdam"}


def _optim_hyper(data, rule: str) -> dict:
    from ..api import optimizers
    draw = data.draw
    cls = getattr(optimizers, _OPTIMIZERS[rule])
    if rule == "adam" and draw(st.booleans(), label="decoupled"):
        cls = optimizers.AdamW
    group = dict(cls._defaults)
    group.update(lr=draw(st.sampled_from([1e-4, 1e-3, 1e-2, 0.1]), label="lr"),
                 maximize=draw(st.booleans(), label="maximize"),
                 weight_decay=draw(st.sampled_from([0.0, 0.01, 0.5]), label="weight_decay"))
    if "eps" in group:
        group["eps"] = draw(st.sampled_from([1e-8, 1e-3]), label="eps")
    if "betas" in group:
        group["betas"] = (draw(st.sampled_from([0.0, 0.5, 0.9]), label="beta1"),
                          draw(st.sampled_from([0.9, 0.999, 0.99999]), label="beta2"))
    for name in ("amsgrad", "centered", "decoupled_weight_decay"):
        if name in group:
            group[name] = draw(st.booleans(), label=name)
    if rule == "sgd":
        group.update(momentum=draw(st.sampled_from([0.0, 0.5, 0.9]), label="momentum"),
                     dampening=draw(st.sampled_from([0.0, 0.1]), label="dampening"))
        group["nesterov"] = bool(group["momentum"]) and not group["dampening"] and \
            draw(st.booleans(), label="nesterov")
    if rule == "rmsprop":
        group.update(alpha=draw(st.sampled_from([0.9, 0.99]), label="alpha"),
                     momentum=draw(st.sampled_from([0.0, 0.9]), label="momentum"))
    if rule == "adagrad":
        group["lr_decay"] = draw(st.sampled_from([0.0, 0.01]), label="lr_decay")
    if rule == "nadam":
        group["momentum_decay"] = draw(st.sampled_from([4e-3, 0.1]), label="momentum_decay")
    # RAdam leaves its adaptive term out for the first steps; NAdam's product of mu is
    # formed over every step.
    top = 10 ** 4 if rule == "nadam" else 10 ** 6
    step = draw(st.one_of(st.integers(1, 8), st.integers(1, top)), label="step")
    state = {"step": step}
    if rule == "nadam":
        state["mu_product"] = math.prod(optimizers.NAdam._mu(group, t) for t in range(1, step))
    opt = cls.__new__(cls)                     # (only its rule: no parameters needed)
    opt._advance(group, state)
    return opt._hyper(group, state, draw(st.booleans(), label="first"))


def _optim_state(data, rule: str, hyper: dict, n: int, name: str = "") -> tuple:
    """(w, g, the state arrays the hyper's flags use: None for the others) of ``n``
    elements; second moments and sums are drawn >= 0, RMSprop's mean square well above its
    mean's square (as a running mean makes it: sq - mean^2 is then far from cancelling)."""
    draw = data.draw
    w, g = (draw(dgst.arrays((n,)), label=f"{k}{name}") for k in ("w", "g"))

    def any_(k):
        return draw(dgst.arrays((n,)), label=f"{k}{name}")

    def nonneg(k):
        return np.abs(draw(dgst.arrays((n,), 0.0, 4.0), label=f"{k}{name}"))
    if rule == "sgd":
        state = (any_("buf") if hyper["momentum_buffer"] else None,)
    elif rule == "rmsprop":
        mean = any_("grad_avg") if hyper["centered"] else None
        d = np.abs(g.astype(np.float64)) + hyper["l2"] * np.abs(w)
        floor = 4 * (np.square(d) + (np.square(mean.astype(np.float64)) if hyper["centered"]
                                     else 0))
        sq = (nonneg("square_avg") + floor).astype(np.float32)
        state = (sq, any_("momentum_buffer") if hyper["momentum_buffer"] else None, mean)
    elif rule == "adagrad":
        state = (nonneg("sum"),)
    elif rule == "adamax":
        state = (any_("exp_avg"), nonneg("exp_inf"))
    else:
        state = (any_("exp_avg"), nonneg("exp_avg_sq"),
                 nonneg("max_exp_avg_sq") if hyper.get("amsgrad") else None)
    return w, g, state


def _optim_scales(rule: str, hyper: dict, w, g, state, ref) -> tuple:
    """(the terms' length, the magnitudes bounding each result's error: the weight's, then
    each state array's as ``state`` holds them, None for those not used) of one update, from
    its inputs and the reference's results ``ref`` (w, then the state)."""
    f64 = [None if a is None else np.asarray(a, np.float64) for a in (w, g, *state)]
    w, g, s = f64[0], f64[1], f64[2:]
    cw, cs = np.asarray(ref[0], np.float64), [None if a is None else np.asarray(a, np.float64)
                                               for a in ref[1:]]
    l2 = hyper.get("l2", hyper.get("wd", 0.0))
    d = np.abs(g) + l2 * np.abs(w)
    step = np.abs(cw - w)
    if rule == "sgd":
        mom = hyper["momentum"]
        if s[0] is not None:
            d = d + mom * (np.abs(s[0]) + np.abs(cs[0]))
        scales = [np.abs(w) + hyper["lr"] * d, mom * np.abs(s[0]) + d if s[0] is not None
                  else None]
        return 6, scales
    if rule == "rmsprop":
        oma = hyper["one_minus_alpha"]
        sq = hyper["alpha"] * s[0] + oma * d * d
        mean = None if s[2] is None else np.abs(s[2]) + oma * (d + np.abs(s[2]))
        var = cs[0] - (np.square(cs[2]) if cs[2] is not None else 0.0)
        avg = np.sqrt(np.maximum(var, 0.0)) + hyper["eps"]
        buf = None if s[1] is None else hyper["momentum"] * np.abs(s[1]) + d / avg
        upd = hyper["lr"] * (buf if buf is not None else d / avg)
        return 16, [np.abs(w) + 2 * step + upd, sq, buf, mean]
    if rule == "adagrad":
        total = s[0] + d * d
        return 10, [np.abs(w) + 2 * step + hyper["clr"] * d / (np.sqrt(cs[0]) + hyper["eps"]),
                    total]
    m_scale = np.abs(s[0]) + hyper["one_minus_beta1"] * (d + np.abs(s[0]))
    if rule == "adamax":
        return 10, [np.abs(w) + 2 * step + hyper["step_size"] * m_scale / cs[1], m_scale,
                    np.abs(cs[1])]
    v_scale = hyper["beta2"] * s[1] + hyper["one_minus_beta2"] * d * d
    if rule == "adam":
        v = cs[2] if cs[2] is not None else cs[1]
        den = np.sqrt(v) / hyper["bc2_sqrt"] + hyper["eps"]
        upd = hyper["step_size"] * m_scale / den
        vmax = None if cs[2] is None else np.abs(cs[2]) + v_scale
        return 12, [np.abs(w) + 2 * step + upd, m_scale, v_scale, vmax]
    if rule == "nadam":
        den = np.sqrt(cs[1]) / hyper["bc2_sqrt"] + hyper["eps"]
        upd = (hyper["grad_coef"] * d + hyper["m_coef"] * m_scale) / den
    else:                                                   # radam
        upd = hyper["step_size"] * m_scale
        if hyper["rectified"]:
            upd = upd / (np.sqrt(cs[1]) + hyper["eps"])
    return 14, [np.abs(w) + 2 * step + upd, m_scale, v_scale]


def _optim_run(backend, rule, hyper, states, many: bool) -> list:
    """Each (w, g, state) of ``states`` updated on ``backend``: [(w, *state)] results."""
    handles = [(backend.upload(w), backend.upload(g),
                tuple(None if a is None else backend.upload(a) for a in state))
               for w, g, state in states]
    if many:
        backend.optim_steps(rule, handles, hyper)
    else:
        for w, g, state in handles:
            backend.optim_step(rule, w, g, state, hyper)
    return [(_fetch(backend, w),) + tuple(None if h is None else _fetch(backend, h)
                                          for h in state) for w, _, state in handles]


def _optim_agreements(pair, rule, hyper, states, many: bool) -> list:
    key = f"optim_step:{rule}"
    ref = _optim_run(pair.ref, rule, hyper, states, many)
    got = _optim_run(pair.dut, rule, hyper, states, many)
    out = []
    for (w, g, state), r, d in zip(states, ref, got):
        length, scales = _optim_scales(rule, hyper, w, g, state, r)
        out += [pair.agree(key, b, a, scale=scale, length=length)
                for b, a, scale in zip(d, r, scales) if a is not None]
    return out


def _optim_check(rule: str, many: bool):
    def run(data, pair):
        hyper = _optim_hyper(data, rule)
        if many:      # several tensors (an optimizer's parameters, some empty) in one update
            sizes = data.draw(st.lists(dgst.sizes(1 << 13), min_size=1, max_size=5),
                              label="sizes")
        else:
            sizes = [data.draw(dgst.sizes(1 << 14), label="size")]
        states = [_optim_state(data, rule, hyper, n, f"[{k}]" if many else "")
                  for k, n in enumerate(sizes)]
        return _optim_agreements(pair, rule, hyper, states, many)
    return run


for _rule in _OPTIMIZERS:
    check(f"optim_step:{_rule}")(_optim_check(_rule, False))
    check(f"optim_steps:{_rule}")(_optim_check(_rule, True))


# -- float16 and bfloat16 ------------------------------------------------------------------------
# The primitives that take float16 and bfloat16 storage themselves (the rest are given it
# widened to float32 by conversions, as the ops on 16-bit tensors do), the binary ones
# where their arrays have one shape.
# The primitives that take 16-bit storage, and the arguments they take in float32 (the
# log-sum-exp attention's backward takes).
_NATIVE_16 = {"unary": set(), "unary_backward": set(), "attention": set(),
              "attention_packed": set(), "attention_backward": {4},
              "attention_packed_backward": {2}}


def _takes_16_bits(name: str, args: tuple):
    """The indices of the arrays among ``args`` that primitive ``name`` takes as 16-bit
    storage (its other arrays as they are), or None where it takes none (every float32
    array is then widened from its rounding)."""
    arrays = {i for i, a in enumerate(args) if isinstance(a, np.ndarray)}
    if name in _NATIVE_16:
        return arrays - _NATIVE_16[name]
    shapes = {args[i].shape for i in arrays}
    return arrays if name in ("binary", "binary_backward") and len(shapes) == 1 else None


class Rounded(Pair):
    """``pair`` as the ops on 16-bit tensors use the primitives (api/low_precision.py):
    float32 inputs are rounded to ``low`` and stored so, then given as they are to the
    primitives that take 16-bit storage, else widened to float32 on each backend and the
    float32 results rounded to ``low`` there (convert16's conversions); they are compared
    under their ``"<entry>@<low>"`` entries."""

    def __init__(self, pair: Pair, low: str):
        self.ref, self.dut, self.flushes = pair.ref, pair.dut, pair.flushes
        self.low, self.dtype = low, LOW_TYPES[low]

    def twin(self, name: str, *args, **kwargs):
        results = []
        native = _takes_16_bits(name, args)
        for backend in (self.ref, self.dut):
            out = getattr(backend, name)(*[self._given(backend, a, native is None or i in
                                                       native, native is not None)
                                           for i, a in enumerate(args)], **kwargs)
            # (as float32 arrays, which hold 16-bit values exactly, for the checks' sums)
            results.append(_as_float32(_fetch(backend, self._narrowed(backend, out))))
        return results

    def agree(self, key: str, got, ref, **context) -> Agreement:
        return super().agree(f"{key}@{self.low}", got, ref, **context)

    def _given(self, backend, a, rounded: bool, stored: bool):
        """A float32 array as the primitive is given it: ``rounded`` to the 16-bit type,
        then ``stored`` so or widened again; else as it is."""
        if isinstance(a, np.ndarray) and a.dtype == F32 and rounded:
            with np.errstate(over="ignore"):           # (inf past the type's range)
                kept = backend.upload(a.astype(self.dtype))
            return kept if stored else backend.cast(kept, np.dtype(F32))
        return _prepare(backend, a)

    def _narrowed(self, backend, out):
        if isinstance(out, tuple):
            return tuple(self._narrowed(backend, o) for o in out)
        return backend.cast(out, self.dtype) if out.dtype == F32 else out


def _as_float32(value):
    if isinstance(value, tuple):
        return tuple(_as_float32(v) for v in value)
    return value.astype(F32) if value.dtype in LOW_TYPES.values() else value


def _rounded_check(low: str, checks: list):
    def run(data, pair):
        chk = checks[0] if len(checks) == 1 else \
            data.draw(st.sampled_from(checks), label="op")
        return chk.run(data, Rounded(pair, low))
    return run


# The primitives behind the ops on 16-bit tensors, each family a check per type (a family
# of several drawing one of them per example). "layers": the checks of the layers'
# primitives that run on the pair's twins alone.
_LAYERS = ("layer_norm", "embedding", "gather", "cumsum", "conv2d", "conv2d_input",
           "max_pool", "attention", "attention_packed", "unfold", "fold")
ROUNDED_CHECKS = {family: [c for c in CHECKS if c.name.split(":")[0] == family]
                  for family in ("unary", "binary", "reduce", "softmax", "log_softmax")}
ROUNDED_CHECKS["matmul"] = [c for c in CHECKS if c.name == "matmul"]
ROUNDED_CHECKS["layers"] = [c for c in CHECKS if c.name in _LAYERS]
for _low in LOW_TYPES:
    for _family, _checks in ROUNDED_CHECKS.items():
        check(f"{_family}@{_low}", samples=len(_checks) > 1)(_rounded_check(_low, _checks))


# -- running ----------------------------------------------------------------------------------------
class Disagreement(AssertionError):
    """A result out of its bound; carries the ``Agreement``."""

    def __init__(self, result: Agreement, check: str):
        super().__init__(f"{check}: {result}")
        self.result = result


@dataclasses.dataclass
class EntryStats:
    """The worst figures seen for one tolerance-table entry."""
    key: str
    cases: int = 0
    elements: int = 0
    max_abs: float = 0.0
    max_ulp: float = 0.0
    max_rel: float = 0.0
    worst: float = 0.0        # the largest error / bound ratio (<= 1 passes)
    failed: bool = False
    worst_input: str = ""     # the example that gave ``worst`` (its draws, summarised)

    def add(self, result: Agreement, example: str = "") -> None:
        self.cases += 1
        self.elements += result.count
        self.max_abs = max(self.max_abs, result.max_abs)
        self.max_ulp = max(self.max_ulp, result.max_ulp)
        self.max_rel = max(self.max_rel, result.max_rel)
        if result.worst > self.worst or self.cases == 1:
            self.worst, self.worst_input = result.worst, example
        self.failed |= not result.ok

    def merge(self, other: "EntryStats") -> None:
        """Fold in the figures of ``other`` (the same entry, from another check)."""
        self.cases += other.cases
        self.elements += other.elements
        for name in ("max_abs", "max_ulp", "max_rel"):
            setattr(self, name, max(getattr(self, name), getattr(other, name)))
        if other.worst > self.worst or not self.worst_input:
            self.worst, self.worst_input = other.worst, other.worst_input
        self.failed |= other.failed

    @property
    def bound(self) -> str:
        return TOLERANCES[self.key].describe()

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["bound"] = self.bound
        d["ok"] = not self.failed
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v))
                for k, v in d.items()}


class _Drawn:
    """Hypothesis's ``data``, noting what each draw gave, to name an entry's worst input."""

    def __init__(self, data):
        self.data, self.draws = data, []
        self._summary = None          # made once, after the last draw

    def draw(self, strategy, label=None):
        value = self.data.draw(strategy, label=label)
        self.draws.append((label or "?", value))
        self._summary = None
        return value

    def summary(self) -> str:
        if self._summary is None:
            self._summary = "; ".join(f"{label} {_summarise(value)}"
                                      for label, value in self.draws)
        return self._summary


def _summarise(value) -> str:
    """An array by its shape and range (its values when few); anything else by repr."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size > 4:
        finite = value[np.isfinite(value)]
        specials = value.size - finite.size
        span = (f"in [{finite.min():.4g}, {finite.max():.4g}]" if finite.size else "")
        extra = f", {specials} non-finite" if specials else ""
        return f"{value.dtype} {value.shape} {span}{extra}"
    if isinstance(value, np.ndarray):
        return f"{value.dtype} {value.shape} {np.array2string(value.reshape(-1), precision=4)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclasses.dataclass
class CheckReport:
    """The outcome of one check over its examples."""
    name: str
    examples: int
    entries: dict
    failure: str = ""          # the failing (shrunk) example and its disagreement

    @property
    def ok(self) -> bool:
        return not self.failure


def run_check(chk: Check, pair: Pair, examples: int = 25, seed: int | None = None,
              shrink: bool = True) -> CheckReport:
    """Run ``chk`` for ``examples`` Hypothesis examples (derandomized unless ``seed`` is
    given). On the first disagreement Hypothesis shrinks the inputs to a small failing
    example, which the report's ``failure`` describes."""
    report = CheckReport(chk.name, 0, {})

    def body(data):
        report.examples += 1
        drawn = _Drawn(data)
        for result in chk.run(drawn, pair):
            report.entries.setdefault(result.key, EntryStats(result.key)).add(
                result, drawn.summary())
            if not result.ok:
                raise Disagreement(result, chk.name)

    phases = None if shrink else [p for p in settings.default.phases if p.name != "shrink"]
    config = settings(max_examples=examples, deadline=None, database=None,
                      report_multiple_bugs=False,
                      derandomize=seed is None, verbosity=Verbosity.normal,
                      suppress_health_check=list(HealthCheck),
                      **({"phases": phases} if phases else {}))
    test = config(given(st.data())(body))
    if seed is not None:
        from hypothesis import seed as hypothesis_seed
        test = hypothesis_seed(seed)(test)
    try:
        test()
    except Disagreement as exc:
        # Hypothesis notes the shrunk example's draws; long arrays are cut to a line each.
        notes = [" ".join(str(n).split()) for n in getattr(exc, "__notes__", [])]
        notes = [n if len(n) <= 200 else n[:197] + "..." for n in notes]
        report.failure = "\n".join([str(exc), *notes])
    return report
