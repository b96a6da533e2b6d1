"""Float32 forward and backward of every op against a NumPy float64 reference, on each backend.

Tests take the ``device`` fixture, so they run on cpu today and on the Vulkan backend once it
exists. Tolerances live in TOL below. Hypothesis draws shapes and broadcasting patterns for
the elementwise ops and reductions. Special values, dtypes and Tensor plumbing are at the end.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dualgrad as dg

F32 = np.float32
FMAX = float(np.finfo(F32).max)

# Allowed error of a float32 result against the float64 reference, in ULP of the magnitude
# behind it: ulp(m) = np.spacing(float32(m)), m = |reference| unless a test passes the sum of
# |terms| that produced it. Results summed over n terms get TOL["per_term"] * (n - 1) ULP more.
# Every bound also allows the half ULP that rounding the exact result to float32 costs.
TOL = {
    # + - * neg abs relu clamp maximum minimum, and the copies (reshape, transpose, embedding,
    # dropout's scaling): IEEE float32 rounds these correctly and Vulkan must too. The cpu
    # backend computes in float64 and rounds once, which gives the same bits (double rounding
    # is innocuous for + - * / sqrt), so: equality with the float64 result rounded to float32.
    "exact": 0,
    # One / or sqrt: correctly rounded on cpu, but Vulkan allows 2.5 ULP for x / y and takes
    # sqrt from inversesqrt (about 3 ULP).
    "div": 3,
    # One exp, log, tanh, erf or sigmoid: a few ULP (libm on cpu is under 1).
    "transcendental": 4,
    # Two or more inexact steps: pow (exp2 of y * log2 x on a GPU), and gradients computed
    # from a rounded forward output (sqrt', exp', tanh', softmax', layer_norm' ...).
    # Results of exp-based ops are measured against |result| * (1 + |exponent|), because
    # rounding the argument of a float32 exp costs that much (Vulkan: 3 + 2|x| ULP for exp).
    "composite": 8,
    # Sums (sum, mean, matmul, linear, broadcast gradients, softmax and layer-norm rows): each
    # float32 addition rounds once, so the classic bound (n - 1) u sum|terms| holds whatever
    # the order (sequential, blocked BLAS, tree reduction on a GPU).
    "per_term": 1,
    # log near 1: Vulkan bounds log's absolute error by 2**-21 on [0.5, 2], where the result
    # is near 0 and ULP-relative bounds are meaningless.
    "log_atol": 2.0 ** -21,
}

# Hypothesis reuses the function-scoped backend fixture across examples: it only selects a
# backend, so that is safe.
HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])


def check(out, ref, kind, n=1, mag=None, atol=0.0, signed_zero=False):
    """Assert that float32 ``out`` matches float64 ``ref`` within TOL[kind] (see TOL)."""
    out = np.asarray(out)
    ref = np.asarray(ref, np.float64)
    assert out.dtype == F32, f"dtype {out.dtype}, expected float32"
    assert out.shape == ref.shape, f"shape {out.shape}, expected {ref.shape}"
    with np.errstate(over="ignore", invalid="ignore"):
        ref32 = ref.astype(F32)
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(out), nan, err_msg="NaN positions differ")
    if signed_zero:
        np.testing.assert_array_equal(np.signbit(out[~nan]), np.signbit(ref32[~nan]),
                                      err_msg="signs differ")
    if TOL[kind] == 0 and n <= 1 and atol == 0:
        np.testing.assert_array_equal(out, ref32)
        return
    inf = np.isinf(ref)
    np.testing.assert_array_equal(out[inf], ref[inf], err_msg="infinities differ")
    mag = np.abs(ref) if mag is None else np.broadcast_to(np.asarray(mag, np.float64),
                                                          ref.shape)
    # Clip to the float32 range so that a huge (or undefined) magnitude gives a huge bound.
    mag = np.nan_to_num(np.minimum(np.abs(mag), FMAX), nan=FMAX).astype(F32)
    with np.errstate(over="ignore"):
        units = TOL[kind] + TOL["per_term"] * max(n - 1, 0)
        bound = (units * np.spacing(mag).astype(np.float64)
                 + 0.5 * np.spacing(np.abs(ref32)).astype(np.float64) + atol)
    with np.errstate(invalid="ignore"):        # inf - inf where both are inf: masked below
        err = np.abs(out.astype(np.float64) - ref)
    bad = np.isfinite(ref) & ~(err <= bound)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{bad.sum()} of {bad.size} elements out of tolerance ({kind}, "
                             f"n={n}); first at {i}: got {out[i]!r}, expected {ref[i]!r}, "
                             f"error {err[i]:.3g} > bound {bound[i]:.3g}")


def run(fn, arrays, g):
    """Forward fn on float32 tensors made from arrays, backward with output gradient g;
    returns (output value, input gradients). Everything happens inside one tape, which is
    where a device keeps the pass's tensors alive."""
    with dg.with_grad_tape():
        ts = [dg.ag_tensor(a, requires_grad=True) for a in arrays]
        out = fn(*ts)
        assert isinstance(out, dg.Tensor) and out.dtype == F32
        y = out.numpy()
        out.backward(g)
        grads = [t.grad.numpy() for t in ts]
    return y, grads


def r32(v):
    """A bound rounded to float32: hypothesis wants float32-representable bounds."""
    return float(F32(v))


def f32(lo, hi, tiny=1e-3):
    """float32 values in [lo, hi] that are 0 or at least ``tiny`` in magnitude, so no result
    is subnormal (a GPU may flush those to zero) and no quotient overflows."""
    r = r32
    parts = [st.just(0.0)] if lo <= 0 <= hi else []
    if hi >= tiny:
        parts.append(st.floats(r(max(lo, tiny)), r(hi), width=32))
    if lo <= -tiny:
        parts.append(st.floats(r(lo), r(min(hi, -tiny)), width=32))
    return st.one_of(parts)


def nonzero32(lo, hi, tiny=1e-3):
    return st.one_of(st.floats(r32(tiny), r32(hi), width=32),
                     st.floats(r32(lo), r32(-tiny), width=32))


GRAD_ELEMENTS = f32(-10.0, 10.0, tiny=1e-2)


def unbroadcast(full, shape):
    """Sum a broadcast-shaped array down to ``shape`` (the reference of gradient sums)."""
    lead = full.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and full.shape[lead + i] != 1)
    return full.sum(axis=axes, keepdims=True).reshape(shape)


# ---------------------------------------------------------------------------------------------
# Binary elementwise ops with broadcasting

def _binary_grads(op, a, b, g):
    """(dL/da, dL/db, magnitude of each) in the broadcast shape, in float64."""
    with np.errstate(all="ignore"):
        if op == "add":
            ga, gb = g, g
        elif op == "sub":
            ga, gb = g, -g
        elif op == "mul":
            ga, gb = g * b, g * a
        elif op == "div":
            ga, gb = g / b, -g * a / (b * b)
        elif op == "pow":
            ga, gb = g * b * a ** (b - 1), g * a ** b * np.log(a)
            # exp2(b log2 a) loses accuracy with |b log2 a| (see exp_scaled); log(a) near 0
            # has an absolute error, so gb is measured against |g a**b| as well.
            t = 1 + np.abs(b * np.log2(a))
            return ga, gb, np.abs(ga) * t, np.abs(g * a ** b) * (np.abs(np.log(a)) + 1) * t
        elif op == "atan2":             # (0 at the origin, as PyTorch's)
            r = np.where((a == 0) & (b == 0), 0.0, 1 / np.where((a == 0) & (b == 0), 1.0,
                                                                a * a + b * b))
            ga, gb = g * b * r, -g * a * r
        else:
            tie = (a == b) * 0.5
            a_wins = (a > b) if op == "maximum" else (a < b)
            b_wins = (b > a) if op == "maximum" else (b < a)
            ga, gb = g * (a_wins + tie), g * (b_wins + tie)
    ga, gb = np.broadcast_to(ga, g.shape), np.broadcast_to(gb, g.shape)
    return ga, gb, np.abs(ga), np.abs(gb)


BINARY = {
    # op: (NumPy reference, elements of a, elements of b, forward kind, gradient kinds)
    "add": (np.add, f32(-1e3, 1e3), f32(-1e3, 1e3), "exact", ("exact", "exact")),
    "sub": (np.subtract, f32(-1e3, 1e3), f32(-1e3, 1e3), "exact", ("exact", "exact")),
    "mul": (np.multiply, f32(-1e3, 1e3), f32(-1e3, 1e3), "exact", ("exact", "exact")),
    "div": (np.divide, f32(-1e3, 1e3), nonzero32(-1e3, 1e3), "div", ("div", "composite")),
    "pow": (np.power, f32(0.25, 4.0), f32(-3.0, 3.0), "composite", ("composite", "composite")),
    "maximum": (np.maximum, f32(-1e3, 1e3), f32(-1e3, 1e3), "exact", ("exact", "exact")),
    "minimum": (np.minimum, f32(-1e3, 1e3), f32(-1e3, 1e3), "exact", ("exact", "exact")),
    "atan2": (np.arctan2, f32(-1e3, 1e3), f32(-1e3, 1e3), "composite",
              ("composite", "composite")),
}


@pytest.mark.parametrize("op", list(BINARY))
@HYP
@given(data=st.data())
def test_binary(device, op, data):
    ref_fn, elem_a, elem_b, kind, grad_kinds = BINARY[op]
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                         min_side=1, max_side=4))
    (sa, sb), shape = shapes.input_shapes, shapes.result_shape
    a = data.draw(hnp.arrays(F32, sa, elements=elem_a), label="a")
    b = data.draw(hnp.arrays(F32, sb, elements=elem_b), label="b")
    g = data.draw(hnp.arrays(F32, shape, elements=GRAD_ELEMENTS), label="g")
    y, (da, db) = run(getattr(dg, op), [a, b], g)
    a64, b64, g64 = (v.astype(np.float64) for v in (a, b, g))
    ref = ref_fn(a64, b64)
    fmag = np.abs(ref) * (1 + np.abs(b64 * np.log2(a64))) if op == "pow" else None
    check(y, ref, kind, mag=fmag, signed_zero=kind == "exact")
    ga, gb, ma, mb = _binary_grads(op, a64, b64, g64)
    check(da, unbroadcast(ga, sa), grad_kinds[0], n=g.size // a.size, mag=unbroadcast(ma, sa))
    check(db, unbroadcast(gb, sb), grad_kinds[1], n=g.size // b.size, mag=unbroadcast(mb, sb))


@pytest.mark.parametrize("op", list(BINARY))
def test_binary_zero_size(device, op):
    a = np.ones((0, 3), F32) * 2
    b = np.full((1, 3), 1.5, F32)
    y, (da, db) = run(getattr(dg, op), [a, b], np.zeros((0, 3), F32))
    assert y.shape == (0, 3) and y.dtype == F32
    check(da, np.zeros((0, 3)), "exact")
    check(db, np.zeros((1, 3)), "exact")     # a sum over no elements is 0


# ---------------------------------------------------------------------------------------------
# Unary ops, and binary ops with a Python number (scalar kernels; the number is rounded to
# float32 first, as for any float32 operand)

_SQRT2 = math.sqrt(2.0)
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_erf = np.vectorize(math.erf, otypes=[np.float64])


def np_gelu(x):
    return 0.5 * x * _erfc(-x / _SQRT2)          # erfc: accurate where gelu(x) ~ 0


def np_gelu_grad(x):
    return 0.5 * _erfc(-x / _SQRT2) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def np_sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def np_sigmoid_tail(x):
    """sigmoid without 1 + tanh's cancellation for x << 0 (np_sigmoid loses digits there)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def np_silu(x):
    return x * np_sigmoid_tail(x)


def np_silu_grad(x):
    return np_sigmoid_tail(x) * (1 + x * np_sigmoid_tail(-x))


def np_softplus(x):                    # PyTorch's: x itself past the threshold 20
    return np.where(x > 20, x, np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x))))


def np_softplus_grad(x):
    return np.where(x > 20, 1.0, np_sigmoid_tail(x))


def s32(v):
    """A Python number as the float32 the op computes with."""
    return float(F32(v))


SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
GELU_K = math.sqrt(2.0 / math.pi)


def np_selu(x):
    return SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))


def np_selu_grad(x):
    return SELU_SCALE * np.where(x > 0, 1.0, SELU_ALPHA * np.exp(x))


def np_mish(x):
    return x * np.tanh(np.logaddexp(0.0, x))


def np_mish_grad(x):
    t = np.tanh(np.logaddexp(0.0, x))
    return t + x * np_sigmoid_tail(x) * (1.0 - t * t)


def gelu_u(x):
    """2u of gelu's tanh form 0.5 x (1 + tanh(u)) = x sigmoid(2u)."""
    return 2.0 * GELU_K * (x + 0.044715 * x ** 3)


def np_gelu_tanh(x):
    return x * np_sigmoid_tail(gelu_u(x))      # (1 + tanh(u) would cancel for x << 0)


def np_gelu_tanh_grad(x):
    s, r = np_sigmoid_tail(gelu_u(x)), np_sigmoid_tail(-gelu_u(x))
    return s + x * s * r * 2.0 * GELU_K * (1.0 + 3 * 0.044715 * x * x)


def expm1_mag(x, r):
    """expm1 is exp(x) - 1 from |x| = ln2/2 on: its error is exp's, relative to e^x."""
    return np.where(np.abs(x) < 0.3466, np.abs(r),
                    np.maximum(np.abs(r), np.exp(x)) * (1 + np.abs(x)))


def exp_scaled(exponent):
    """Magnitude for exp-based results: Vulkan's exp and exp2 lose accuracy with the size of
    their argument (3 + 2|t| ULP), as does any float32 exp whose argument is rounded, so the
    error is measured against |result| * (1 + |t|)."""
    return lambda x, r: np.abs(r) * (1 + np.abs(exponent(x)))


def with_g(x, g, r):
    """Gradients formed from a rounded float32 output cancel in y*(1-y) (sigmoid) and
    1 - y*y (tanh), and erf cancels near -1 (gelu): that costs about eps*|g|."""
    return np.abs(r) + np.abs(g)


_LOG2_15 = math.log2(s32(1.5))


def log2_abs(x):
    return np.log2(np.maximum(np.abs(x), 1e-30))

# name: (op, reference, derivative, elements, forward kind, gradient kind,
#        forward magnitude (x, ref) -> array or None for |ref|,
#        gradient magnitude (x, g, ref) -> array or None for |ref|)
UNARY = {
    "neg": (dg.neg, np.negative, lambda x: -np.ones_like(x), f32(-1e3, 1e3), "exact",
            "exact", None, None),
    "abs": (dg.abs, np.abs, np.sign, f32(-1e3, 1e3), "exact", "exact", None, None),
    "relu": (dg.relu, lambda x: np.maximum(x, 0.0), lambda x: (x > 0) * 1.0,
             f32(-1e3, 1e3), "exact", "exact", None, None),
    "exp": (dg.exp, np.exp, np.exp, f32(-20.0, 20.0), "transcendental", "composite",
            exp_scaled(lambda x: x), lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    # log near 1 is near 0: Vulkan bounds its absolute error there (TOL["log_atol"]).
    "log": (dg.log, np.log, lambda x: 1.0 / x, f32(1e-3, 1e3), "transcendental", "div",
            None, None),
    "sqrt": (dg.sqrt, np.sqrt, lambda x: 0.5 / np.sqrt(x), f32(1e-3, 1e3), "div",
             "composite", None, None),
    # gelu = x Phi(x) ~ 0 for x << 0, where a float32 Phi has an absolute error: measure
    # against |x| as well.
    "gelu": (dg.gelu, np_gelu, np_gelu_grad, f32(-10.0, 10.0), "transcendental",
             "composite", lambda x, r: np.abs(r) + np.abs(x), with_g),
    "sigmoid": (dg.sigmoid, np_sigmoid, lambda x: np_sigmoid(x) * np_sigmoid(-x),
                f32(-20.0, 20.0), "transcendental", "composite", exp_scaled(lambda x: x),
                lambda x, g, r: np.abs(r) * (1 + np.abs(x)) + np.abs(g)),
    "tanh": (dg.tanh, np.tanh, lambda x: 1.0 - np.tanh(x) ** 2, f32(-10.0, 10.0),
             "transcendental", "composite", None, with_g),
    # silu's gradient s (1 + x (1 - s)) cancels near x = -1.28: measured against the
    # magnitude of its terms, |g s| (1 + |x|), and exp's growth
    "silu": (dg.silu, np_silu, np_silu_grad, f32(-20.0, 20.0), "composite", "composite",
             exp_scaled(lambda x: x),
             lambda x, g, r: (np.abs(r) + np.abs(g) * (1 + np.abs(x))) * (1 + np.abs(x))),
    "softplus": (dg.softplus, np_softplus, np_softplus_grad, f32(-30.0, 30.0), "composite",
                 "composite", exp_scaled(lambda x: x),
                 lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    "square": (dg.square, np.square, lambda x: 2.0 * x, f32(-1e3, 1e3), "exact", "exact",
               None, None),
    "sign": (dg.sign, np.sign, np.zeros_like, f32(-1e3, 1e3), "exact", "exact", None, None),
    "floor": (dg.floor, np.floor, np.zeros_like, f32(-1e3, 1e3), "exact", "exact", None, None),
    "ceil": (dg.ceil, np.ceil, np.zeros_like, f32(-1e3, 1e3), "exact", "exact", None, None),
    "round": (dg.round, np.rint, np.zeros_like, f32(-1e3, 1e3), "exact", "exact", None, None),
    "trunc": (dg.trunc, np.trunc, np.zeros_like, f32(-1e3, 1e3), "exact", "exact", None, None),
    "hardtanh": (lambda t: dg.hardtanh(t, -1.5, 2.5), lambda x: np.clip(x, -1.5, 2.5),
                 lambda x: ((x > -1.5) & (x < 2.5)) * 1.0, f32(-5.0, 5.0), "exact", "exact",
                 None, None),
    "relu6": (dg.relu6, lambda x: np.clip(x, 0.0, 6.0), lambda x: ((x > 0) & (x < 6)) * 1.0,
              f32(-10.0, 10.0), "exact", "exact", None, None),
    "clamp": (lambda t: dg.clamp(t, -1.5, 2.5), lambda x: np.clip(x, -1.5, 2.5),
              lambda x: ((x >= -1.5) & (x <= 2.5)) * 1.0, f32(-5.0, 5.0), "exact", "exact",
              None, None),
    "clamp_min": (lambda t: dg.clamp(t, min=0.5), lambda x: np.maximum(x, 0.5),
                  lambda x: (x >= 0.5) * 1.0, f32(-5.0, 5.0), "exact", "exact", None, None),
    "clamp_max": (lambda t: dg.clamp(t, max=-0.5), lambda x: np.minimum(x, -0.5),
                  lambda x: (x <= -0.5) * 1.0, f32(-5.0, 5.0), "exact", "exact", None, None),
    "add_s": (lambda t: t + 0.1, lambda x: x + s32(0.1), np.ones_like, f32(-1e3, 1e3),
              "exact", "exact", None, None),
    "rsub_s": (lambda t: 0.1 - t, lambda x: s32(0.1) - x, lambda x: -np.ones_like(x),
               f32(-1e3, 1e3), "exact", "exact", None, None),
    "mul_s": (lambda t: t * -0.3, lambda x: x * s32(-0.3),
              lambda x: np.full_like(x, s32(-0.3)), f32(-1e3, 1e3), "exact", "exact", None,
              None),
    "div_s": (lambda t: t / 0.3, lambda x: x / s32(0.3),
              lambda x: np.full_like(x, 1.0 / s32(0.3)), f32(-1e3, 1e3), "div", "div", None,
              None),
    "rdiv_s": (lambda t: 0.3 / t, lambda x: s32(0.3) / x, lambda x: -s32(0.3) / (x * x),
               nonzero32(-1e3, 1e3, tiny=1e-2), "div", "composite", None, None),
    "pow_s": (lambda t: t ** 1.7, lambda x: x ** s32(1.7),
              lambda x: s32(1.7) * x ** (s32(1.7) - 1), f32(1e-2, 1e2), "composite",
              "composite", exp_scaled(lambda x: s32(1.7) * np.log2(x)),
              lambda x, g, r: np.abs(r) * (1 + np.abs(s32(1.7) * np.log2(x)))),
    "pow_s_int": (lambda t: t ** 3, lambda x: x ** 3, lambda x: 3 * x ** 2, f32(-30.0, 30.0),
                  "composite", "composite", exp_scaled(lambda x: 3 * log2_abs(x)),
                  lambda x, g, r: np.abs(r) * (1 + np.abs(2 * log2_abs(x)))),
    "rpow_s": (lambda t: 1.5 ** t, lambda x: s32(1.5) ** x,
               lambda x: s32(1.5) ** x * math.log(s32(1.5)), f32(-10.0, 10.0), "composite",
               "composite", exp_scaled(lambda x: x * _LOG2_15),
               lambda x, g, r: np.abs(r) * (1 + np.abs(x * _LOG2_15))),
    "reciprocal": (dg.reciprocal, lambda x: 1.0 / x, lambda x: -1.0 / (x * x),
                   nonzero32(-1e3, 1e3, tiny=1e-2), "div", "composite", None, None),
    "rsqrt": (dg.rsqrt, lambda x: 1.0 / np.sqrt(x), lambda x: -0.5 * x ** -1.5,
              f32(1e-3, 1e3, tiny=1e-3), "div", "composite", None, None),
    "exp2": (dg.exp2, np.exp2, lambda x: np.exp2(x) * math.log(2.0), f32(-20.0, 20.0),
             "transcendental", "composite", exp_scaled(lambda x: x),
             lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    "expm1": (dg.expm1, np.expm1, np.exp, f32(-20.0, 20.0), "composite", "composite",
              expm1_mag, lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    "log2": (dg.log2, np.log2, lambda x: 1.0 / (x * math.log(2.0)), f32(1e-3, 1e3),
             "transcendental", "composite", None, None),
    "log10": (dg.log10, np.log10, lambda x: 1.0 / (x * math.log(10.0)), f32(1e-3, 1e3),
              "composite", "composite", None, None),
    "log1p": (dg.log1p, np.log1p, lambda x: 1.0 / (1.0 + x), f32(-0.99, 1e3),
              "composite", "composite", None, None),
    "leaky_relu": (lambda t: dg.leaky_relu(t, 0.2), lambda x: np.where(x > 0, x, x * s32(0.2)),
                   lambda x: np.where(x > 0, 1.0, s32(0.2)), f32(-1e3, 1e3), "exact", "exact",
                   None, None),
    "elu": (lambda t: dg.elu(t, 1.5), lambda x: np.where(x > 0, x, s32(1.5) * np.expm1(x)),
            lambda x: np.where(x > 0, 1.0, s32(1.5) * np.exp(x)), f32(-20.0, 20.0),
            "composite", "composite", exp_scaled(lambda x: x),
            lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    "selu": (dg.selu, np_selu, np_selu_grad, f32(-20.0, 20.0), "composite", "composite",
             exp_scaled(lambda x: x), lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    # t = x / 0.7 is rounded before its exp: 2.5|t| ULP more (Vulkan's division)
    "celu": (lambda t: dg.celu(t, 0.7),
             lambda x: np.where(x > 0, x, s32(0.7) * np.expm1(x / s32(0.7))),
             lambda x: np.where(x > 0, 1.0, np.exp(x / s32(0.7))), f32(-20.0, 20.0),
             "composite", "composite", exp_scaled(lambda x: 2 * x / 0.7),
             lambda x, g, r: np.abs(r) * (1 + 2 * np.abs(x / 0.7))),
    "hardsigmoid": (dg.hardsigmoid, lambda x: np.clip(x + 3.0, 0.0, 6.0) / 6.0,
                    lambda x: ((x > -3) & (x < 3)) / 6.0, f32(-10.0, 10.0), "composite",
                    "div", None, None),
    "hardswish": (dg.hardswish, lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
                  lambda x: np.where(x <= -3, 0.0, np.where(x < 3, (2 * x + 3) / 6, 1.0)),
                  f32(-10.0, 10.0), "composite", "composite", None, None),
    "softsign": (dg.softsign, lambda x: x / (1.0 + np.abs(x)),
                 lambda x: 1.0 / (1.0 + np.abs(x)) ** 2, f32(-1e3, 1e3), "composite",
                 "composite", None, None),
    "logsigmoid": (dg.logsigmoid, lambda x: -np.logaddexp(0.0, -x),
                   lambda x: np_sigmoid_tail(-x), f32(-30.0, 30.0), "composite", "composite",
                   exp_scaled(lambda x: x), lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    # mish's gradient cancels near x = -1.19: measured against its terms, as silu's
    "mish": (dg.mish, np_mish, np_mish_grad, f32(-20.0, 20.0), "composite", "composite",
             exp_scaled(lambda x: x),
             lambda x, g, r: (np.abs(r) + np.abs(g) * (1 + np.abs(x))) * (1 + np.abs(x))),
    "gelu_tanh": (lambda t: dg.gelu(t, approximate="tanh"), np_gelu_tanh, np_gelu_tanh_grad,
                  f32(-10.0, 10.0), "composite", "composite", exp_scaled(gelu_u),
                  lambda x, g, r: ((np.abs(r) + np.abs(g) * (1 + np.abs(x)))
                                   * (1 + np.abs(gelu_u(x))))),
    "sin": (dg.sin, np.sin, np.cos, f32(-100.0, 100.0), "transcendental", "composite", None,
            None),
    "cos": (dg.cos, np.cos, lambda x: -np.sin(x), f32(-100.0, 100.0), "transcendental",
            "composite", None, None),
    # tan's gradient 1 + y^2 is formed from the rounded y: twice its error
    "tan": (dg.tan, np.tan, lambda x: 1.0 / np.cos(x) ** 2, f32(-100.0, 100.0), "composite",
            "composite", None, lambda x, g, r: 2 * np.abs(r)),
    "asin": (dg.asin, np.arcsin, lambda x: 1.0 / np.sqrt(1.0 - x * x), f32(-1.0, 1.0),
             "composite", "composite", None, None),
    "acos": (dg.acos, np.arccos, lambda x: -1.0 / np.sqrt(1.0 - x * x), f32(-1.0, 1.0),
             "composite", "composite", None, None),
    "atan": (dg.atan, np.arctan, lambda x: 1.0 / (1.0 + x * x), f32(-1e3, 1e3), "composite",
             "composite", None, None),
    "sinh": (dg.sinh, np.sinh, np.cosh, f32(-20.0, 20.0), "composite", "composite",
             exp_scaled(lambda x: x), lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    "cosh": (dg.cosh, np.cosh, np.sinh, f32(-20.0, 20.0), "composite", "composite",
             exp_scaled(lambda x: x), lambda x, g, r: np.abs(r) * (1 + np.abs(x))),
    "asinh": (dg.asinh, np.arcsinh, lambda x: 1.0 / np.sqrt(1.0 + x * x), f32(-1e3, 1e3),
              "composite", "composite", None, None),
    "acosh": (dg.acosh, np.arccosh, lambda x: 1.0 / np.sqrt(x * x - 1.0), f32(1.0, 1e3),
              "composite", "composite", None, None),
    "atanh": (dg.atanh, np.arctanh, lambda x: 1.0 / (1.0 - x * x), f32(-1.0, 1.0),
              "composite", "composite", None, None),
    # exp(-x^2) inside: its argument's size costs as exp's does
    "erf": (dg.erf, _erf, lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), f32(-6.0, 6.0),
            "composite", "composite", None, lambda x, g, r: np.abs(r) * (1 + x * x)),
    "erfc": (dg.erfc, _erfc, lambda x: -2 / math.sqrt(math.pi) * np.exp(-x * x),
             f32(-9.0, 9.0), "composite", "composite", lambda x, r: np.abs(r) * (1 + x * x),
             lambda x, g, r: np.abs(r) * (1 + x * x)),
    "maximum_s": (lambda t: dg.maximum(t, 0.25), lambda x: np.maximum(x, s32(0.25)),
                  lambda x: np.where(x == s32(0.25), 0.5, x > s32(0.25)), f32(-5.0, 5.0), "exact",
                  "exact", None, None),
    "minimum_s": (lambda t: dg.minimum(-0.25, t), lambda x: np.minimum(s32(-0.25), x),
                  lambda x: np.where(x == s32(-0.25), 0.5, x < s32(-0.25)), f32(-5.0, 5.0),
                  "exact", "exact", None, None),
}


@pytest.mark.parametrize("name", list(UNARY))
@HYP
@given(data=st.data())
def test_unary(device, name, data):
    fn, ref_fn, dref, elements, kind, grad_kind, fmag, gmag = UNARY[name]
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=6))
    x = data.draw(hnp.arrays(F32, shape, elements=elements), label="x")
    g = data.draw(hnp.arrays(F32, shape, elements=GRAD_ELEMENTS), label="g")
    y, (dx,) = run(fn, [x], g)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):     # (poles: asin' at 1, ...)
        ref, gref = ref_fn(x64), g64 * dref(x64)
    check(y, ref, kind, mag=fmag and fmag(x64, ref),
          atol=TOL["log_atol"] if name in ("log", "log2", "log10") else 0.0,
          signed_zero=kind == "exact")
    check(dx, gref, grad_kind, mag=gmag and gmag(x64, g64, gref))


# ---------------------------------------------------------------------------------------------
# Reductions


@st.composite
def axes_for(draw, ndim):
    """None, an int, or a tuple of distinct axes, each maybe negative."""
    if ndim == 0:
        return draw(st.sampled_from([None, ()]))
    if draw(st.booleans()):
        return None
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    signed = tuple(a - ndim if draw(st.booleans()) else a for a in chosen)
    return signed[0] if len(signed) == 1 and draw(st.booleans()) else signed


@pytest.mark.parametrize("op", ["sum", "mean", "amax"])
@HYP
@given(data=st.data())
def test_reduce(device, op, data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    # Integers in [-8, 8] make ties common for max; the rest are spread out.
    elements = st.one_of(f32(-1e3, 1e3), st.integers(-8, 8).map(float))
    x = data.draw(hnp.arrays(F32, shape, elements=elements), label="x")
    axis = data.draw(axes_for(len(shape)), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    axis_np = None if axis == () else axis     # (dim=() is every axis, as PyTorch's)
    x64 = x.astype(np.float64)
    total = np.sum(x64, axis=axis_np, keepdims=keepdims)
    n = x.size // max(total.size, 1)                  # elements per reduced group
    g = data.draw(hnp.arrays(F32, total.shape, elements=GRAD_ELEMENTS), label="g")
    y, (dx,) = run(lambda t: getattr(dg, op)(t, axis, keepdims), [x], g)
    kshape = np.sum(x64, axis=axis_np, keepdims=True).shape
    gk = g.astype(np.float64).reshape(kshape)
    abs_sum = np.sum(np.abs(x64), axis=axis_np, keepdims=keepdims)
    if op == "sum":
        check(y, total, "exact", n=n, mag=abs_sum)
        check(dx, np.broadcast_to(gk, x.shape), "exact")
    elif op == "mean":
        check(y, total / n, "div", n=n, mag=abs_sum / n)
        check(dx, np.broadcast_to(gk / n, x.shape), "div")
    else:
        top = np.max(x64, axis=axis_np, keepdims=True)
        check(y, np.max(x64, axis=axis_np, keepdims=keepdims), "exact")
        hit = x64 == top                         # tied maxima share the gradient evenly
        count = np.sum(hit, axis=axis_np, keepdims=True)
        check(dx, np.where(hit, gk / count, 0.0), "div")


def test_reduce_zero_length(device):
    x = np.zeros((0, 3), F32)
    y, (dx,) = run(lambda t: dg.sum(t, axis=0), [x], np.ones(3, F32))
    check(y, np.zeros(3), "exact")
    check(dx, np.zeros((0, 3)), "exact")
    with dg.with_grad_tape():
        m = dg.mean(dg.ag_tensor(x), axis=0).numpy()
        assert m.shape == (3,) and np.isnan(m).all()          # the mean of nothing is NaN
        assert dg.max(dg.ag_tensor(x), axis=1).numpy().shape == (0,)   # nothing to reduce
        with pytest.raises(dg.ShapeError):
            dg.max(dg.ag_tensor(x), axis=0)                   # max of nothing is undefined


# ---------------------------------------------------------------------------------------------
# Shape ops: pure data movement, so exact in both directions

@pytest.mark.parametrize("src, dst", [((3, 4), (4, 3)), ((2, 3, 4), (-1, 4)),
                                      ((12,), (1, 2, 3, 2)), ((6,), (1, 6, 1)),
                                      ((1,), ()), ((0, 3), (3, 0))])
def test_reshape(device, src, dst, rng):
    x = rng.standard_normal(src).astype(F32)
    ref_y = x.reshape(dst)
    g = rng.standard_normal(ref_y.shape).astype(F32)
    y, (dx,) = run(lambda t: t.reshape(dst), [x], g)
    check(y, ref_y, "exact", signed_zero=True)
    check(dx, g.reshape(src), "exact", signed_zero=True)


@pytest.mark.parametrize("shape, axes", [((3, 4), None), ((2, 3, 4), None),
                                         ((2, 3, 4), (1, 0, 2)), ((2, 3, 4, 5), (0, 2, 3, 1)),
                                         ((2, 3, 4, 5), (3, 2, 1, 0)), ((2, 3, 4), (-1, 0, 1)),
                                         ((0, 3), None), ((7,), None), ((), None)])
def test_transpose(device, shape, axes, rng):
    x = rng.standard_normal(shape).astype(F32)
    ref_y = np.transpose(x, axes)
    g = rng.standard_normal(ref_y.shape).astype(F32)
    y, (dx,) = run(lambda t: dg.transpose(t, axes), [x], g)
    check(y, ref_y, "exact", signed_zero=True)
    inverse = np.argsort(np.arange(len(shape))[::-1] if axes is None
                         else [a % len(shape) for a in axes])
    check(dx, np.transpose(g, inverse), "exact", signed_zero=True)
    if axes is None:
        check(dg.ag_tensor(x).T.numpy(), ref_y, "exact")


@pytest.mark.parametrize("axes", [(0, 5), (0, -3), (1, 1)])
def test_transpose_rejects_bad_axes(axes):
    # NumPy raises for an axis outside [-ndim, ndim) and for a repeated axis.
    with pytest.raises(ValueError):
        np.transpose(np.zeros((2, 3)), axes)
    with pytest.raises(ValueError):
        dg.transpose(dg.ag_tensor(np.zeros((2, 3))), axes)


# ---------------------------------------------------------------------------------------------
# Matrix products: sums over the inner dimension K

def _matmul_grads(a, b, g):
    ga = g @ np.swapaxes(b, -1, -2)
    gb = np.swapaxes(a, -1, -2) @ g
    if a.ndim == 2 and ga.ndim == 3:       # a shared by the batch: its gradient sums over it
        ga = ga.sum(0)
    if b.ndim == 2 and gb.ndim == 3:
        gb = gb.sum(0)
    return ga, gb


@pytest.mark.parametrize("sa, sb", [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)),
                                    ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)), ((1, 1), (1, 1)),
                                    ((7, 13), (13, 1)), ((5, 64), (64, 3)), ((3, 0), (0, 2)),
                                    ((0, 4), (4, 2))])
def test_matmul(device, sa, sb, rng):
    a = rng.uniform(-1, 1, sa).astype(F32)
    b = rng.uniform(-1, 1, sb).astype(F32)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    g = rng.uniform(-1, 1, ref.shape).astype(F32)
    g64 = g.astype(np.float64)
    y, (da, db) = run(lambda s, t: s @ t, [a, b], g)
    check(y, ref, "exact", n=sa[-1], mag=np.abs(a64) @ np.abs(b64))
    ga, gb = _matmul_grads(a64, b64, g64)
    ma, mb = _matmul_grads(np.abs(a64), np.abs(b64), np.abs(g64))
    batch = ref.shape[0] if ref.ndim == 3 else 1
    n_a = sb[-1] * (batch if len(sa) == 2 else 1)     # a shared by the batch sums over it
    n_b = sa[-2] * (batch if len(sb) == 2 else 1)
    check(da, ga, "exact", n=n_a, mag=ma)
    check(db, gb, "exact", n=n_b, mag=mb)


@pytest.mark.parametrize("sx, out, bias", [((4, 3), 5, True), ((4, 3), 5, False),
                                           ((2, 3, 4), 5, True), ((2, 3, 4), 6, False),
                                           ((1, 33), 13, True)])
def test_linear(device, sx, out, bias, rng):
    x = rng.uniform(-1, 1, sx).astype(F32)
    w = rng.uniform(-1, 1, (out, sx[-1])).astype(F32)
    b = rng.uniform(-1, 1, out).astype(F32)
    x64, w64, b64 = (v.astype(np.float64) for v in (x, w, b))
    ref = x64 @ w64.T + (b64 if bias else 0.0)
    mag = np.abs(x64) @ np.abs(w64).T + (np.abs(b64) if bias else 0.0)
    g = rng.uniform(-1, 1, ref.shape).astype(F32)
    g64 = g.astype(np.float64)
    arrays = [x, w, b] if bias else [x, w]
    y, grads = run(dg.linear, arrays, g)
    check(y, ref, "exact", n=sx[-1] + bias, mag=mag)
    rows = x.size // sx[-1]
    g2, x2 = g64.reshape(rows, out), x64.reshape(rows, -1)
    check(grads[0], g64 @ w64, "exact", n=out, mag=np.abs(g64) @ np.abs(w64))
    check(grads[1], g2.T @ x2, "exact", n=rows, mag=np.abs(g2).T @ np.abs(x2))
    if bias:
        check(grads[2], g2.sum(0), "exact", n=rows, mag=np.abs(g2).sum(0))


# ---------------------------------------------------------------------------------------------
# Softmax family, losses, layer normalisation, embedding


def np_log_softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


@pytest.mark.parametrize("shape, axis", [((4, 7), -1), ((3, 4, 5), 1), ((3, 4, 5), 0),
                                         ((2, 33), -1), ((6,), 0)])
def test_softmax(device, shape, axis, rng):
    x = rng.uniform(-10, 10, shape).astype(F32)
    g = rng.uniform(-1, 1, shape).astype(F32)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    n = shape[axis]
    ls = np_log_softmax(x64, axis)
    p = np.exp(ls)
    # exp(x - max) in float32: rounding x - max costs eps/2 * |x - max| relative in the
    # result, so softmax errors are measured against p * (1 + |x - max|).
    spread = 1 + np.abs(x64 - np.max(x64, axis=axis, keepdims=True))
    y, (dx,) = run(lambda t: dg.softmax(t, axis), [x], g)
    check(y, p, "composite", n=n, mag=p * spread)
    gp = np.sum(g64 * p, axis=axis, keepdims=True)
    mag = p * spread * (np.abs(g64) + np.sum(np.abs(g64) * p * spread, axis=axis,
                                             keepdims=True))
    check(dx, p * (g64 - gp), "composite", n=n, mag=mag)
    # log_softmax = x - lse: its error is relative to |x| + |lse|, not to the result.
    lse = x64 - ls
    y, (dx,) = run(lambda t: dg.log_softmax(t, axis=axis), [x], g)
    check(y, ls, "composite", n=n, mag=np.abs(x64) + np.abs(lse))
    gs = np.sum(g64, axis=axis, keepdims=True)
    mag = np.abs(g64) + p * np.sum(np.abs(g64), axis=axis, keepdims=True) * (
        1 + np.abs(x64) + np.abs(lse))
    check(dx, g64 - p * gs, "composite", n=n, mag=mag)


@pytest.mark.parametrize("seed", [None, 2.5], ids=["from the loss", "given grad"])
@pytest.mark.parametrize("rows, classes", [(5, 7), (3, 40), (1, 1)])
def test_softmax_cross_entropy(device, rows, classes, rng, seed):
    x = rng.uniform(-5, 5, (rows, classes)).astype(F32)
    targets = rng.integers(0, classes, rows)
    x64 = x.astype(np.float64)
    ls = np_log_softmax(x64)
    lse = x64 - ls
    picked = ls[np.arange(rows), targets]
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        loss = dg.softmax_cross_entropy(t, targets)
        assert loss.shape == ()
        value = loss.numpy()
        loss.backward(None if seed is None else np.float32(seed))
        dx = t.grad.numpy()
    mag = np.mean(np.abs(lse[np.arange(rows), targets]) + np.abs(x64[np.arange(rows), targets]))
    check(value, -np.mean(picked), "composite", n=rows + classes, mag=mag)
    onehot = np.eye(classes)[targets]
    p = np.exp(ls)
    scale = 1.0 if seed is None else seed
    mag = (p * (1 + np.abs(x64) + np.abs(lse)) + onehot) / rows * scale
    check(dx, (p - onehot) / rows * scale, "composite", n=classes, mag=mag)


@pytest.mark.parametrize("loss_is", ["the root", "a term of the root", "too large"])
def test_the_cross_entropys_gradient_is_made_by_its_forward_where_backward_starts_there(
        device, rng, monkeypatch, loss_is):
    # backward() from the loss takes the logits' gradient that its forward made, and runs
    # no backward kernel for it; below a sum of terms (or past SEEDED_LOGITS, where the
    # forward makes none) the rule runs. The gradient is the same each way.
    be = dg.api.device.active()
    calls = []
    real = be.softmax_cross_entropy_backward
    monkeypatch.setattr(be, "softmax_cross_entropy_backward",
                        lambda *a: (calls.append(1), real(*a))[1])
    x = rng.uniform(-5, 5, (300, 10)).astype(F32)
    targets = rng.integers(0, 10, 300)
    w = dg.ag_param(rng.standard_normal((10, 10)).astype(F32))

    def grad_of_w(root):
        with dg.with_grad_tape():
            loss = dg.softmax_cross_entropy(dg.linear(x, w), targets)
            (loss if root else loss + dg.sum(w) * 0.0).backward()
        g = w.grad.numpy()
        w.grad = None
        return g
    if loss_is == "too large":
        monkeypatch.setattr(dg.api.losses, "SEEDED_LOGITS", x.size - 1)
    got = grad_of_w(root=loss_is != "a term of the root")
    assert len(calls) == (0 if loss_is == "the root" else 1)
    monkeypatch.setattr(dg.api.losses, "SEEDED_LOGITS", 0)         # the rule, from the loss
    want = grad_of_w(root=True)
    # (On the gpu 1 / rows and g / rows with g = 1 may round apart: a few ulps.)
    np.testing.assert_allclose(got, want, rtol=4 * float(np.finfo(F32).eps), atol=1e-9)
    assert np.abs(want).max() > 1e-3


def test_mse_loss(device, rng):
    pred = rng.uniform(-2, 2, (3, 5)).astype(F32)
    target = rng.uniform(-2, 2, (3, 5)).astype(F32)
    d = pred.astype(np.float64) - target.astype(np.float64)
    with dg.with_grad_tape():
        tp, tt = dg.ag_tensor(pred, requires_grad=True), dg.ag_tensor(target, requires_grad=True)
        loss = dg.mse_loss(tp, tt)
        value = loss.numpy()
        loss.backward()
        gp, gt = tp.grad.numpy(), tt.grad.numpy()
        # a NumPy target is a constant
        check(dg.mse_loss(tp, target).numpy(), np.mean(d * d), "composite", n=d.size)
    check(value, np.mean(d * d), "composite", n=d.size)
    check(gp, 2 * d / d.size, "composite")
    check(gt, -2 * d / d.size, "composite")


@pytest.mark.parametrize("shape, eps", [((4, 7), 1e-5), ((2, 3, 16), 1e-5), ((5, 3), 1e-2),
                                        ((19, 300), 1e-5), ((3, 1500), 1e-5)])
def test_layer_norm(device, shape, eps, rng):
    """Rows shorter and longer than the gpu's subgroup form takes (SUBGROUP_ROW_MAX)."""
    x = rng.uniform(-2, 2, shape).astype(F32)
    w = rng.uniform(0.5, 1.5, shape[-1]).astype(F32)
    b = rng.uniform(-1, 1, shape[-1]).astype(F32)
    g = rng.uniform(-1, 1, shape).astype(F32)
    x64, w64, b64, g64 = (v.astype(np.float64) for v in (x, w, b, g))
    n = shape[-1]
    mu = x64.mean(-1, keepdims=True)
    rs = 1.0 / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x64 - mu) * rs
    y, (dx, dw, db) = run(lambda s, t, u: dg.layer_norm(s, t, u, eps=eps), [x, w, b], g)
    check(y, xhat * w64 + b64, "composite", n=n, mag=(np.abs(xhat) + 1) * w64 + np.abs(b64))
    gw = g64 * w64
    a_mean = gw.mean(-1, keepdims=True)
    b_mean = (gw * xhat).mean(-1, keepdims=True)
    mag = rs * (np.abs(gw) + np.abs(gw).mean(-1, keepdims=True)
                + np.abs(xhat) * np.abs(gw * xhat).mean(-1, keepdims=True))
    check(dx, rs * (gw - a_mean - xhat * b_mean), "composite", n=n, mag=mag)
    rows = x.size // n
    axes = tuple(range(len(shape) - 1))
    check(dw, (g64 * xhat).sum(axes), "composite", n=rows, mag=np.abs(g64 * xhat).sum(axes))
    check(db, g64.sum(axes), "exact", n=rows, mag=np.abs(g64).sum(axes))


@pytest.mark.parametrize("n", [7, 300, 1500])
def test_layer_norm_without_bias_shifts_nothing(device, n, rng, monkeypatch):
    """bias None (LayerNorm(bias=False)): no shift, not a shift by zeros (-0 stays -0, as
    PyTorch's), nothing filled on the device; the same bits otherwise, and gradients for x
    and the weight only."""
    from dualgrad.api import device as devices
    x = rng.uniform(-2, 2, (5, n)).astype(F32)
    w = rng.uniform(0.5, 1.5, n).astype(F32)
    w[:3] = [0.0, -0.0, -1.0]                       # zeros of both signs times xhat
    g = rng.uniform(-1, 1, (5, n)).astype(F32)
    y, (dx, dw) = run(lambda s, t: dg.layer_norm(s, t, eps=1e-5), [x, w], g)
    y0, (dx0, dw0, _) = run(lambda s, t, u: dg.layer_norm(s, t, u, eps=1e-5),
                            [x, w, np.zeros(n, F32)], g)
    np.testing.assert_array_equal(dx, dx0)
    np.testing.assert_array_equal(dw, dw0)
    np.testing.assert_array_equal(y, y0)            # (equal: -0 == +0)
    below = x[:, :2] < x.astype(np.float64).mean(axis=1, keepdims=True)
    np.testing.assert_array_equal(np.signbit(y[:, :2]), below != np.signbit(w[:2]))
    assert not np.signbit(y0[:, :2]).any()          # (-0 + 0 is +0)
    backend = devices.active()
    fills = []
    fill = type(backend).fill
    monkeypatch.setattr(type(backend), "fill",
                        lambda self, *args: (fills.append(args), fill(self, *args))[1])
    norm = dg.nn.LayerNorm(n, bias=False)
    with dg.with_grad_tape():
        out = norm(dg.ag_tensor(x))
    assert fills == [] and norm.bias is None and out.shape == (5, n)


def test_layer_norm_and_embedding_write_a_parameters_first_gradient_in_place(device, rng,
                                                                             monkeypatch):
    """The weight's, bias's and table's first gradients are written into their .grad
    storage (no copy after), and a second backward adds to them."""
    from dualgrad.api import device as devices
    backend, copies = devices.active(), []
    copy = type(backend).copy
    monkeypatch.setattr(type(backend), "copy",
                        lambda self, *args: (copies.append(args), copy(self, *args))[1])
    table = dg.ag_param(rng.standard_normal((5, 8)).astype(F32))
    norm = dg.nn.LayerNorm(8)
    idx = np.array([[1, 4, 1]])
    grads = []
    for _ in range(2):
        with dg.with_grad_tape():
            dg.sum(norm(dg.embedding(table, idx)) * 2.0).backward()
        grads.append([p.grad.numpy().copy() for p in (table, norm.weight, norm.bias)])
    assert copies == []
    np.testing.assert_array_equal(grads[0][2], np.full(8, 6.0, F32))     # 3 rows of 2
    for first, second in zip(*grads):
        np.testing.assert_array_equal(second, 2 * first)
    assert not grads[0][0][[0, 2, 3]].any()                # rows never looked up


@pytest.mark.parametrize("idx", [[[1, 3, 1], [0, 3, 3]], [5, 0, 5, 5], [[[2]]]])
def test_embedding(device, idx, rng):
    idx = np.array(idx, np.int64)
    table = rng.standard_normal((6, 4)).astype(F32)
    g = rng.standard_normal(idx.shape + (4,)).astype(F32)
    y, (dt,) = run(lambda t: dg.embedding(t, idx), [table], g)
    check(y, table[idx], "exact", signed_zero=True)
    ref, mag = np.zeros((6, 4)), np.zeros((6, 4))
    np.add.at(ref, idx.reshape(-1), g.reshape(-1, 4).astype(np.float64))
    np.add.at(mag, idx.reshape(-1), np.abs(g.reshape(-1, 4)).astype(np.float64))
    check(dt, ref, "exact", n=int(np.bincount(idx.reshape(-1)).max()), mag=mag)


# ---------------------------------------------------------------------------------------------
# Dropout: an independent Philox4x32-10 reproduces the documented mask exactly

_M32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(ctr, key):
    """Random123's Philox4x32-10 on arrays of 32-bit words held in uint64."""
    c0, c1, c2, c3 = (np.asarray(c, np.uint64) for c in ctr)
    k0, k1 = (np.uint64(k) for k in key)
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & _M32,
                          (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _M32)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & _M32, (k1 + np.uint64(0xBB67AE85)) & _M32
    return c0, c1, c2, c3


def test_reference_philox_known_answers():
    # Random123's published known-answer vectors for Philox4x32-10.
    for ctr, key, expected in [
            ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
            ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2,
             (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
            ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
             (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]:
        assert tuple(int(w) for w in philox4x32_10(ctr, key)) == expected


def dropout_keep(n, p, seed, step):
    """The documented mask: counter (i//4 lo, i//4 hi, step lo, step hi), key (seed lo,
    seed hi); element i keeps word i % 4's top 24 bits u and survives when
    u >= round(p * 2**24)."""
    block = np.arange((n + 3) // 4, dtype=np.uint64)
    ones = np.ones_like(block)
    ctr = (block & _M32, block >> np.uint64(32), ones * np.uint64(step & 0xFFFFFFFF),
           ones * np.uint64(step >> 32))
    words = philox4x32_10(ctr, (seed & 0xFFFFFFFF, seed >> 32))
    u = np.stack(words, axis=1).reshape(-1)[:n] >> np.uint64(8)
    return u >= np.uint64(round(p * 2 ** 24))


@pytest.mark.parametrize("shape, p, seed, step", [((37,), 0.5, 0, 0), ((5, 7), 0.1, 1234, 7),
                                                  ((2, 3, 4, 5), 0.9, 2 ** 40 + 3, 2 ** 35 + 1)])
def test_dropout(device, shape, p, seed, step, rng):
    x = rng.standard_normal(shape).astype(F32)
    g = rng.standard_normal(shape).astype(F32)
    keep = dropout_keep(x.size, p, seed, step).reshape(shape)
    assert 0 < keep.sum() < keep.size
    scale = s32(1.0 / (1.0 - p))           # the scale is a float32 operand: one exact multiply
    y, (dx,) = run(lambda t: dg.dropout(t, p, seed, step), [x], g)
    check(y, np.where(keep, x.astype(np.float64) * scale, 0.0), "exact")
    check(dx, np.where(keep, g.astype(np.float64) * scale, 0.0), "exact")
    # the same (seed, step) repeats the mask; another step draws a different one
    with dg.no_grad():
        again = dg.dropout(dg.ag_tensor(x), p, seed, step).numpy()
        other = dg.dropout(dg.ag_tensor(np.ones(shape, F32)), p, seed, step + 1).numpy()
    np.testing.assert_array_equal(again, y)
    assert ((other != 0) != keep).any()


def test_dropout_extremes(device, rng):
    x = rng.standard_normal((4, 5)).astype(F32)
    with dg.no_grad():
        np.testing.assert_array_equal(dg.dropout(dg.ag_tensor(x), 0.0, 3, 4).numpy(), x)
        np.testing.assert_array_equal(dg.dropout(dg.ag_tensor(x), 1.0, 3, 4).numpy(),
                                      np.zeros_like(x))


# ---------------------------------------------------------------------------------------------
# Special values: NaN and inf propagation, signed zeros, division by zero

NAN, INF = float("nan"), float("inf")
SPECIAL = np.array([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5], F32)


SPECIAL_CASES = [
    ("relu", dg.relu, lambda x: np.where(x > 0, x, np.where(np.isnan(x), x, 0.0)), "exact"),
    ("neg", dg.neg, np.negative, "exact"),
    ("abs", dg.abs, np.abs, "exact"),
    ("exp", dg.exp, np.exp, "transcendental"),
    ("log", dg.log, np.log, "transcendental"),
    ("sqrt", dg.sqrt, np.sqrt, "div"),
    ("tanh", dg.tanh, np.tanh, "transcendental"),
    ("sigmoid", dg.sigmoid, np_sigmoid, "transcendental"),
    ("silu", dg.silu, np_silu, "composite"),            # NaN at -inf, as x * sigmoid(x)
    ("softplus", dg.softplus, np_softplus, "composite"),
    ("square", dg.square, np.square, "exact"),
    ("floor", dg.floor, np.floor, "exact"),
    ("ceil", dg.ceil, np.ceil, "exact"),
    ("round", dg.round, np.rint, "exact"),
    ("trunc", dg.trunc, np.trunc, "exact"),
    ("hardtanh", dg.hardtanh, lambda x: np.clip(x, -1.0, 1.0), "exact"),
    ("reciprocal", dg.reciprocal, lambda x: 1.0 / x, "div"),
    ("rsqrt", dg.rsqrt, lambda x: 1.0 / np.sqrt(x), "div"),
    ("exp2", dg.exp2, np.exp2, "transcendental"),
    ("expm1", dg.expm1, np.expm1, "transcendental"),
    ("log2", dg.log2, np.log2, "transcendental"),
    ("log10", dg.log10, np.log10, "composite"),
    ("log1p", dg.log1p, np.log1p, "composite"),
    ("leaky_relu", dg.leaky_relu, lambda x: np.where(x > 0, x, x * s32(0.01)), "exact"),
    ("elu", dg.elu, lambda x: np.where(x > 0, x, np.expm1(x)), "composite"),
    ("selu", dg.selu, np_selu, "composite"),
    ("celu", dg.celu, lambda x: np.where(x > 0, x, np.expm1(x)), "composite"),
    ("hardsigmoid", dg.hardsigmoid, lambda x: np.clip(x + 3.0, 0.0, 6.0) / 6.0, "composite"),
    ("hardswish", dg.hardswish, lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0, "composite"),
    ("softsign", dg.softsign, lambda x: x / (1.0 + np.abs(x)), "composite"),
    ("logsigmoid", dg.logsigmoid, lambda x: -np.logaddexp(0.0, -x), "composite"),
    ("mish", dg.mish, np_mish, "composite"),            # NaN at -inf, as x * tanh(...)
    ("gelu_tanh", lambda t: dg.gelu(t, approximate="tanh"), np_gelu_tanh, "composite"),
    ("sin", dg.sin, np.sin, "composite"),               # NaN at +-inf
    ("cos", dg.cos, np.cos, "composite"),
    ("tan", dg.tan, np.tan, "composite"),
    ("asin", dg.asin, np.arcsin, "composite"),          # NaN outside [-1, 1]
    ("acos", dg.acos, np.arccos, "composite"),
    ("atan", dg.atan, np.arctan, "composite"),          # +-pi/2 at +-inf
    ("sinh", dg.sinh, np.sinh, "composite"),
    ("cosh", dg.cosh, np.cosh, "composite"),
    ("asinh", dg.asinh, np.arcsinh, "composite"),
    ("acosh", dg.acosh, np.arccosh, "composite"),       # NaN below 1
    ("atanh", dg.atanh, np.arctanh, "composite"),       # +-inf at +-1
    ("erf", dg.erf, _erf, "composite"),
    ("erfc", dg.erfc, _erfc, "composite"),
    ("clamp", lambda t: dg.clamp(t, -0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), "exact"),
    ("maximum_s", lambda t: dg.maximum(t, 0.5), lambda x: np.maximum(x, 0.5), "exact"),
    ("minimum_s", lambda t: dg.minimum(t, 0.5), lambda x: np.minimum(x, 0.5), "exact"),
    ("div_by_zero", lambda t: t / 0.0, lambda x: x / 0.0, "exact"),
    ("rdiv", lambda t: 1.0 / t, lambda x: 1.0 / x, "div"),
    ("add_inf", lambda t: t + INF, lambda x: x + INF, "exact"),
    ("mul_zero", lambda t: t * 0.0, lambda x: x * 0.0, "exact"),
]


@pytest.mark.parametrize("name, fn, ref, kind", SPECIAL_CASES,
                         ids=[c[0] for c in SPECIAL_CASES])
def test_special_values_unary(device, name, fn, ref, kind):
    with np.errstate(all="ignore"):
        expected = ref(SPECIAL.astype(np.float64))
    with dg.no_grad():
        out = fn(dg.ag_tensor(SPECIAL)).numpy()
    # The sign of a zero result is IEEE-defined for the exact ops (neg(0) = -0,
    # relu(-0) = +0, 1/-0 = -inf); NaNs are compared by position only.
    check(out, expected, kind, signed_zero=kind == "exact")


def test_special_values_spelled_out(device):
    def v(fn, x):
        return fn(dg.ag_tensor(np.array(x, F32))).numpy()

    with dg.no_grad():
        assert np.isnan(v(dg.relu, [NAN])).all()
        r = v(dg.relu, [-0.0])
        assert r[0] == 0.0 and not np.signbit(r[0])           # relu(-0.0) is +0.0
        n = v(dg.neg, [0.0])
        assert n[0] == 0.0 and np.signbit(n[0])               # neg(0.0) is -0.0
        assert np.isnan(v(lambda t: dg.clamp(t, 0.0, 1.0), [NAN])).all()
        assert v(dg.exp, [-INF])[0] == 0.0
        assert v(dg.log, [0.0])[0] == -INF
        assert np.isnan(v(dg.sqrt, [-1.0])).all()
        a = dg.ag_tensor(np.array([NAN, 1.0, NAN], F32))
        b = dg.ag_tensor(np.array([1.0, NAN, NAN], F32))
        for op in (dg.maximum, dg.minimum):
            assert np.isnan(op(a, b).numpy()).all()           # NaN from either side wins
            assert np.isnan(op(b, a).numpy()).all()
        x = dg.ag_tensor(np.array([[1.0, NAN, 3.0], [1.0, 2.0, 3.0]], F32))
        np.testing.assert_array_equal(np.isnan(dg.max(x, axis=1).numpy()), [True, False])
        np.testing.assert_array_equal(np.isnan(dg.sum(x, axis=1).numpy()), [True, False])
        np.testing.assert_array_equal(dg.softmax(dg.ag_tensor(np.array([0.0, -INF, 0.0], F32)))
                                      .numpy(), np.array([0.5, 0.0, 0.5], F32))
        q = dg.div(dg.ag_tensor(np.array([1.0, -1.0, 0.0], F32)),
                   dg.ag_tensor(np.zeros(3, F32))).numpy()
        assert q[0] == INF and q[1] == -INF and np.isnan(q[2])   # IEEE division by zero


def test_special_values_backward(device):
    # Derivatives that are infinite at a point give inf (as NumPy/IEEE), not an exception.
    x = np.array([0.0, 4.0], F32)
    g = np.ones(2, F32)
    _, (d,) = run(dg.sqrt, [x], g)
    check(d, [INF, 0.25], "composite")
    _, (d,) = run(dg.log, [x], g)
    check(d, [INF, 0.25], "div")
    _, (d,) = run(lambda t: 1.0 / t, [x], g)
    check(d, [-INF, -1.0 / 16], "composite")


# ---------------------------------------------------------------------------------------------
# dtypes, Tensor plumbing, and what gets recorded

def test_results_are_float32(device, rng):
    x = rng.uniform(0.5, 2.0, (3, 4)).astype(F32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        outs = [t + t, t - 1, 2 * t, t / 3, t ** 2, -t, dg.exp(t), dg.log(t), dg.sqrt(t),
                dg.relu(t), dg.gelu(t), dg.sigmoid(t), dg.tanh(t), dg.clamp(t, 0.7, 1.2),
                dg.maximum(t, t), dg.sum(t), dg.mean(t, 0), dg.max(t, 1).values, t.reshape(4, 3),
                t.T, t @ t.T, dg.softmax(t), dg.log_softmax(t), dg.layer_norm(t, x[0], x[0]),
                dg.linear(t, x), dg.dropout(t, 0.5, 1, 1), dg.mse_loss(t, x),
                dg.softmax_cross_entropy(t, np.array([0, 1, 2])),
                dg.embedding(t, np.array([0, 2]))]
        for out in outs:
            assert out.dtype == F32 and out.numpy().dtype == F32
        dg.sum(outs[0]).backward()
        assert t.grad.dtype == F32 and t.grad.numpy().dtype == F32
    assert dg.ag_tensor(x.astype(np.float64)).dtype == F32      # float32 by default
    assert dg.ag_tensor(np.arange(3)).dtype == F32


def test_mixed_dtypes_are_rejected():
    a = dg.ag_tensor(np.ones(3), dtype="float64")
    b = dg.ag_tensor(np.ones(3))
    for op in (dg.add, dg.mul, dg.maximum):
        with pytest.raises(dg.ArgumentTypeError):
            op(a, b)
    # NumPy operands take the tensor's dtype instead (float64 stays float64 on cpu)
    assert (np.ones(3) + a).dtype == np.float64
    assert (a * np.ones(3, F32)).dtype == np.float64


def test_numpy_returns_a_copy(device):
    src = np.arange(6, dtype=F32).reshape(2, 3)
    t = dg.ag_tensor(src)
    src[0, 0] = 100.0                       # ag_tensor copied its input
    first = t.numpy()
    first[...] = -7.0                       # and numpy() hands out a copy
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=F32).reshape(2, 3))
    assert t.numpy() is not t.numpy()
    arr = np.asarray(t)
    assert isinstance(arr, np.ndarray) and arr.dtype == F32
    np.testing.assert_array_equal(arr, t.numpy())
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), arr.astype(np.float64))
    data = dg.ag_data(t)
    assert isinstance(data, np.ndarray) and data.dtype == F32
    data[...] = 5.0
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=F32).reshape(2, 3))
    listed = dg.ag_data([1.0, 2.5])         # non-tensors come back as float32 arrays
    assert listed.dtype == F32 and listed.tolist() == [1.0, 2.5]


@pytest.mark.parametrize("shape", [(1,), (1, 1, 1), ()])
def test_item(device, shape):
    value = F32(0.1)
    t = dg.ag_tensor(np.full(shape, value, F32))
    assert t.shape == shape
    assert isinstance(t.item(), float) and t.item() == float(value)
    assert float(t) == float(value)
    assert dg.sum(dg.ag_tensor(np.full((2, 2), 0.25, F32))).item() == 1.0    # 0-d result
    with pytest.raises(dg.ShapeError):
        dg.ag_tensor(np.zeros(2, F32)).item()


def test_zero_d_tensors(device):
    # NumPy semantics: a 0-d array (or a number) makes a 0-d tensor, and a 0-d loss takes a
    # 0-d (or number) output gradient.
    for value in (np.array(2.5, F32), 2.5, np.float32(2.5)):
        assert dg.ag_tensor(value).shape == np.shape(value)
    with dg.with_grad_tape():
        t = dg.ag_tensor(np.array([1.0, 2.0], F32), requires_grad=True)
        loss = dg.sum(t * t)
        assert loss.shape == ()
        loss.backward(np.array(0.5, F32))
        np.testing.assert_array_equal(t.grad.numpy(), np.array([1.0, 2.0], F32))


def test_ndarray_operand_gives_tensor(device):
    t = dg.ag_tensor(np.array([1.0, 2.0, 4.0], F32))
    arr = np.array([[0.5], [2.0]])          # float64: converted to the tensor's float32
    for result, ref in ((arr + t, arr + [1, 2, 4]), (arr - t, arr - [1, 2, 4]),
                        (arr * t, arr * [1, 2, 4]), (arr / t, arr / [1, 2, 4]),
                        (arr ** t, arr ** [1, 2, 4]), (t + arr, arr + [1, 2, 4])):
        assert isinstance(result, dg.Tensor) and result.dtype == F32
        check(result.numpy(), ref, "composite")
    s = np.float32(3.0) + t
    assert isinstance(s, dg.Tensor)
    check(s.numpy(), [4.0, 5.0, 7.0], "exact")
    m = np.ones((2, 3), F32) @ dg.ag_tensor(np.ones((3, 2), F32))
    assert isinstance(m, dg.Tensor)
    check(m.numpy(), np.full((2, 2), 3.0), "exact")


def test_recording_only_inside_a_tape(device):
    x = np.array([1.0, -2.0, 3.0], F32)
    t = dg.ag_tensor(x, requires_grad=True)
    out = dg.relu(t * 2.0)
    assert out.requires_grad is False            # no tape: nothing recorded
    with pytest.raises(dg.InvalidValueError):
        dg.backward(dg.sum(out))
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        c = dg.ag_tensor(x)
        y = dg.relu(t * 2.0) + c
        assert y.requires_grad is True
        assert (c * c).requires_grad is False    # no input requires grad
        with dg.no_grad():
            assert (t * 2.0).requires_grad is False
        assert (t * 2.0).requires_grad is True   # recording resumes after no_grad
        dg.sum(y).backward()
        np.testing.assert_array_equal(t.grad.numpy(), np.where(x > 0, 2.0, 0.0).astype(F32))
    assert (t + 1.0).requires_grad is False      # the tape is closed again


# ---------------------------------------------------------------------------------------------
# PyTorch's rules at the edges


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_a_tie_with_a_number_splits_the_gradient_as_with_a_tensor(device, op):
    x = np.array([0.0, 1.0, -1.0, 0.0], F32)
    fn = getattr(dg, op)
    wins = (x > 0) if op == "maximum" else (x < 0)
    expected = np.where(x == 0, 0.5, wins).astype(F32)
    for form in (lambda t: fn(t, 0.0), lambda t: fn(0.0, t),
                 lambda t: fn(t, dg.ag_tensor(np.zeros(4, F32)))):
        with dg.with_grad_tape():
            t = dg.ag_tensor(x, requires_grad=True)
            dg.sum(form(t)).backward()
        np.testing.assert_array_equal(t.grad.numpy(), expected)
    with dg.no_grad():
        assert np.isnan(fn(dg.ag_tensor(np.array([NAN, 1.0], F32)), 0.0).numpy()[0])
        assert np.isnan(fn(dg.ag_tensor(np.array([1.0], F32)), NAN).numpy()).all()


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_a_nan_operand_of_maximum_or_minimum_takes_the_whole_gradient_both_sides(device, op):
    """PyTorch's masks: each side gets g unless it is below (above, for minimum) the other,
    half at a tie; with a NaN neither is, so both get all of it (a number operand too)."""
    a = np.array([NAN, 1.0, 2.0, 3.0], F32)
    b = np.array([1.0, NAN, 2.0, 1.0], F32)
    ta, tb = (dg.ag_tensor(v, requires_grad=True) for v in (a, b))
    with dg.with_grad_tape():
        dg.sum(getattr(dg, op)(ta, tb)).backward()
    wins = [1.0, 0.0] if op == "maximum" else [0.0, 1.0]
    np.testing.assert_array_equal(ta.grad.numpy(), [1.0, 1.0, 0.5, wins[0]])
    np.testing.assert_array_equal(tb.grad.numpy(), [1.0, 1.0, 0.5, wins[1]])
    t = dg.ag_tensor(a, requires_grad=True)
    with dg.with_grad_tape():
        dg.sum(getattr(dg, op)(t, 2.0)).backward()
    np.testing.assert_array_equal(t.grad.numpy(), [1.0, wins[1], 0.5, wins[0]])


def test_max_gives_nan_gradients_where_the_maximum_is_nan(device):
    # torch.amax's rule: g / (ties: 0) * [x == max] is NaN for every element of that slice
    x = np.array([[1.0, NAN, 3.0], [1.0, 3.0, 3.0]], F32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        dg.sum(dg.max(t, axis=1)).backward()
    g = t.grad.numpy()
    assert np.isnan(g[0]).all()
    np.testing.assert_array_equal(g[1], [0.0, 0.5, 0.5])


def test_a_0d_tensor_takes_axis_0_and_minus_1(device):
    for axis in (0, -1, (0,)):
        with dg.with_grad_tape():
            z = dg.ag_tensor(np.float32(3.0), requires_grad=True)
            s = dg.sum(z, axis=axis)
            s.backward()
        assert s.shape == () and s.item() == 3.0 and z.grad.item() == 1.0
        with dg.no_grad():
            assert dg.mean(z, axis=axis).item() == 3.0 and dg.max(z, axis=axis).item() == 3.0
            assert dg.softmax(z, axis=axis).item() == 1.0
            assert dg.log_softmax(z, axis=axis).item() == 0.0
    with dg.no_grad():
        assert dg.softmax(z).item() == 1.0 and dg.softmax(z).shape == ()
        for bad in (1, -2, (0, -1)):
            with pytest.raises(ValueError, match="axis"):
                dg.sum(z, axis=bad)
        with pytest.raises(ValueError, match="axis"):
            dg.softmax(z, axis=1)


def test_relu_passes_the_gradient_of_nan_as_pytorch_and_so_does_its_fused_form(device):
    """PyTorch's threshold rule: 0 where x <= 0, else the gradient (NaN is not <= 0); a
    Linear and its ReLU made as one product keeps the same rule."""
    with dg.with_grad_tape():
        t = dg.ag_tensor(np.array([NAN, -1.0, 0.0, 2.0], F32), requires_grad=True)
        dg.sum(dg.relu(t)).backward()
    np.testing.assert_array_equal(t.grad.numpy(), [1.0, 0.0, 0.0, 1.0])
    w = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], F32)
    x = np.array([[NAN, 1.0], [2.0, -3.0]], F32)        # outputs NaN, then 2, -3, -2
    grads = []
    for fused in (True, False):
        with dg.with_grad_tape():
            xt = dg.ag_tensor(x, requires_grad=True)
            y = dg.linear(xt, dg.ag_tensor(w), activation="relu") if fused else \
                dg.relu(dg.linear(xt, dg.ag_tensor(w)))
            dg.sum(y).backward()
        grads.append(xt.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    np.testing.assert_array_equal(grads[0][1], [1.0, 0.0])
    # through a Sequential, where the next layer's product masks the gradient it hands
    # back (a NaN activation's included)
    dg.manual_seed(0)
    model = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.ReLU(), dg.nn.Linear(3, 2))
    model[0].load_state_dict({"weight": w, "bias": np.zeros(3, F32)})
    seen = []
    for fused in (True, False):
        with dg.with_grad_tape():
            xt = dg.ag_tensor(x, requires_grad=True)
            h = model(xt) if fused else model[2](dg.relu(model[0](xt)))
            dg.sum(h).backward()
        seen.append(xt.grad.numpy())
    np.testing.assert_array_equal(seen[0], seen[1])


def test_gradients_at_pytorchs_edge_points(device):
    """hardswish's gradient at -3 and 3 is its outer pieces' (0 and 1), atan2's at the origin
    0 (not 0 / 0), as PyTorch's."""
    with dg.with_grad_tape():
        t = dg.ag_tensor(np.array([-3.0, 3.0], F32), requires_grad=True)
        dg.sum(dg.hardswish(t)).backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 1.0])
    with dg.with_grad_tape():
        y, x = (dg.ag_tensor(np.zeros(2, F32), requires_grad=True) for _ in range(2))
        dg.sum(dg.atan2(y, x)).backward()
    np.testing.assert_array_equal(np.concatenate([y.grad.numpy(), x.grad.numpy()]), 0.0)


def test_clamp_takes_tensor_bounds(device):
    """Bounds broadcast with x; x's gradient where it is the result, each bound's where it
    is; max everywhere a bound pair crosses (min > max), as PyTorch's."""
    x = np.array([[-2.0, 0.0, 0.5, 3.0]], np.float32)
    lo = np.array([[-1.0], [1.0]], np.float32)            # the second row's min is above max
    hi = np.float32(0.75) * np.ones((1, 4), np.float32)
    ts = [dg.ag_tensor(a, requires_grad=True) for a in (x, lo, hi)]
    with dg.with_grad_tape():
        y = dg.clamp(*ts)
        dg.sum(y).backward()
    np.testing.assert_array_equal(y.numpy(), [[-1.0, 0.0, 0.5, 0.75], [0.75] * 4])
    np.testing.assert_array_equal(ts[0].grad.numpy(), [[0.0, 1.0, 1.0, 0.0]])
    np.testing.assert_array_equal(ts[1].grad.numpy(), [[1.0], [0.0]])
    np.testing.assert_array_equal(ts[2].grad.numpy(), [[1.0, 1.0, 1.0, 2.0]])


def test_round_to_decimals_as_pytorch(device):
    x = np.array([1.2345, -2.5551, 0.125, 1234.5], np.float32)
    np.testing.assert_array_equal(dg.round(dg.ag_tensor(x), decimals=2).numpy(),
                                  np.round(x * np.float32(100)) / np.float32(100))
    np.testing.assert_array_equal(dg.round(dg.ag_tensor(x), decimals=-2).numpy(),
                                  [0.0, -0.0, 0.0, 1200.0])


def test_clamp_with_min_above_max_gives_max_everywhere(device):
    x = np.array([-1.0, 1.0, 5.0, NAN], F32)
    with dg.with_grad_tape():
        t = dg.ag_tensor(x, requires_grad=True)
        y = dg.clamp(t, 3.0, 0.0)
        dg.sum(y).backward()
    np.testing.assert_array_equal(y.numpy(), [0.0, 0.0, 0.0, NAN])
    np.testing.assert_array_equal(t.grad.numpy(), [0.0, 0.0, 0.0, 0.0])


@pytest.mark.parametrize("weight", [0.25, 0.75, 1.0, -0.5, "tensor"])
def test_lerp(device, weight):
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4,))
    w = rng.uniform(-1, 2, (3, 1)) if weight == "tensor" else weight
    out = dg.lerp(dg.ag_tensor(a), dg.ag_tensor(b), dg.ag_tensor(w) if weight == "tensor"
                  else w)
    np.testing.assert_allclose(out.numpy(), a + np.asarray(w) * (b - a), rtol=1e-5, atol=1e-6)
    if weight == 1.0:                     # PyTorch's form is exact at the end point
        np.testing.assert_array_equal(out.numpy(), np.broadcast_to(b, (3, 4)).astype(F32))
    if device == "cpu":
        args = [a, b] + ([w] if weight == "tensor" else [])
        dg.gradcheck(lambda *ts: dg.lerp(*ts) if weight == "tensor" else dg.lerp(*ts, w), args)


def test_lerp_names_a_bad_weight(device):
    with pytest.raises(dg.ArgumentTypeError, match=r"^lerp: argument 'weight'"):
        dg.lerp(dg.ag_tensor([1.0]), dg.ag_tensor([2.0]), "half")
    assert np.isnan(dg.lerp(dg.ag_tensor([1.0]), dg.ag_tensor([2.0]), float("nan")).numpy()[0])


def test_atan2_special_values_are_cs(device):
    """Signed zeros and infinities in every quadrant, as C's atan2 (NumPy's) gives them,
    NaN from either side; a number operand on either side."""
    vals = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3e38, 1e-40], F32)
    y, x = (a.reshape(-1) for a in np.meshgrid(vals, vals, indexing="ij"))
    got = dg.atan2(dg.ag_tensor(y), dg.ag_tensor(x)).numpy()
    want = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(F32)
    close = np.abs(got.astype(np.float64) - want) <= 4 * np.spacing(np.abs(want))
    # (a device may flush a subnormal result to a zero of either sign)
    flushed = (np.abs(want) < np.finfo(F32).tiny) & (got == 0)
    assert np.all(close | flushed | (np.isnan(got) & np.isnan(want))), (y, x, got, want)
    assert np.array_equal(np.signbit(got) | flushed, np.signbit(want) | flushed)
    assert dg.atan2(1.0, dg.ag_tensor(np.float32(-1.0))).item() == pytest.approx(3 * np.pi / 4)
    assert dg.atan2(dg.ag_tensor(np.float32(-1.0)), 0.0).item() == pytest.approx(-np.pi / 2)
