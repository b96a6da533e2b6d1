"""Unary ops y = op(x), ops with scalar parameters a and b, and their backward kernels: the
twin of ``shaders/unary.comp``.

Each op has a forward rule y = op(x) and a backward rule dL/dx = op'(x, y) * g: small
functions of one float64 element, whose result is rounded once to the output dtype. For
the basic IEEE operations on float32 inputs that gives exactly the float32 result, so those
ops are bit-exact twins of a float32 shader; the transcendental ones land within about half
an ULP of the true value, which makes this backend a sound reference to measure the GPU
against.

A kernel is compiled per op, the op's code captured in its closure (a constant to Numba);
``forward(op, ...)`` and ``backward(op, ...)`` resolve to that op's rules while Numba types
the kernel, so each kernel types and compiles only its own op's rules, in about 0.3 s. (One
function branching over every op had Numba type every branch for each kernel: 2 s a kernel,
four minutes of a first test run.)

Adding an op: a ``@forward_rule`` and a ``@backward_rule`` naming it (every op of the
registry has both, checked at import).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import types
from numba.extending import overload

from ..kernel_ops import UNARY
from . import convert16, split
from .jit import fma_kernel, scalar
from .vmath import (vacos, vacosh, vasin, vasinh, vatan, vatanh, vcos, vcosh, verf, verfc,
                    vexp, vexp2, vexp2_f32, vexp_f32, vexp_neg_f32, vexpm1, vlog, vlog10,
                    vlog1p, vlog2, vphi, vphi_f32, vsin, vsinh, vtan, vtanh, vtanh_f32)

SOFTPLUS_THRESHOLD = 20.0            # PyTorch's default: softplus(x) is x above it
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_2_SQRTPI = 2.0 / math.sqrt(math.pi)       # erf'(0)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
_GELU_2K = 2.0 * math.sqrt(2.0 / math.pi)     # gelu's tanh form: x sigmoid(2k (x + c x^3))
_GELU_C = 0.044715

FORWARD: dict = {}                   # op code -> compiled rule (x, a, b) -> y
BACKWARD: dict = {}                  # op code -> compiled rule (x, y, g, a, b) -> dL/dx
# op code -> a rule x -> y (x, y, g -> dL/dx) for float32 inputs and outputs that skips
# what float32 cannot tell apart (ranges where the result is already 0, 1 or inf), in less
# time: the same float32 results as FORWARD's rule, bit for bit, and as BACKWARD's for
# finite output gradients but for a zero's sign where the derivative underflows float32
# (its float64 one a subnormal, the shortcut's 0; an infinite g there gives NaN, as float32
# arithmetic does, where the general rule gives inf). tests/test_vmath.py holds them.
FORWARD_F32: dict = {}
BACKWARD_F32: dict = {}


def _registrar(table: dict):
    def rule_for(*names: str):
        """Makes the decorated function (or an inlined helper, as it is) the rule of the
        named ops."""
        def register(fn):
            compiled = fn if hasattr(fn, "py_func") else scalar(fn)
            for name in names:
                table[UNARY.code[name]] = compiled
            return compiled
        return register
    return rule_for


forward_rule = _registrar(FORWARD)
backward_rule = _registrar(BACKWARD)
float32_rule = _registrar(FORWARD_F32)
float32_backward_rule = _registrar(BACKWARD_F32)


def forward(op, x, a, b):
    """y = op(x) for one float64 element; usable only inside a compiled kernel."""
    raise TypeError("cpu.unary.forward is called from compiled kernels only")


def backward(op, x, y, g, a, b):
    """dL/dx for one element, given x, y = op(x) and g = dL/dy; compiled kernels only."""
    raise TypeError("cpu.unary.backward is called from compiled kernels only")


@overload(forward, inline="always")
def _forward_of(op, x, a, b):
    if isinstance(op, types.IntegerLiteral):     # (None for other types: Numba tries on)
        rule = FORWARD[op.literal_value]
        return lambda op, x, a, b: rule(x, a, b)
    return None


def forward_f32(op, x):
    """y = op(x) for one float32 element held as a float64; compiled kernels only."""
    raise TypeError("cpu.unary.forward_f32 is called from compiled kernels only")


@overload(forward_f32, inline="always")
def _forward_f32_of(op, x):
    if isinstance(op, types.IntegerLiteral):
        rule = FORWARD_F32[op.literal_value]
        return lambda op, x: rule(x)
    return None


def backward_f32(op, x, y, g):
    """dL/dx for one float32 element (x, y, g held as float64s); compiled kernels only."""
    raise TypeError("cpu.unary.backward_f32 is called from compiled kernels only")


@overload(backward_f32, inline="always")
def _backward_f32_of(op, x, y, g):
    if isinstance(op, types.IntegerLiteral):
        rule = BACKWARD_F32[op.literal_value]
        return lambda op, x, y, g: rule(x, y, g)
    return None


@overload(backward, inline="always")
def _backward_of(op, x, y, g, a, b):
    if isinstance(op, types.IntegerLiteral):
        rule = BACKWARD[op.literal_value]
        return lambda op, x, y, g, a, b: rule(x, y, g, a, b)
    return None


@scalar
def exp_minus_abs(x):
    """e**-|x| <= 1, and 0 past float64's range (vexp stops at its smallest subnormal), so
    that x * sigmoid(x) at -inf is NaN, as IEEE arithmetic and the shader make it."""
    return 0.0 if abs(x) >= 745.0 else vexp(-abs(x))     # (NaN takes vexp: NaN)


@scalar
def sigmoid64(x):
    """1 / (1 + e**-x) with no overflow on either side."""
    e = exp_minus_abs(x)
    return 1.0 / (1.0 + e) if x >= 0.0 else e / (1.0 + e)


@scalar
def sigmoid_f32(x):
    """sigmoid64 for a float32 x, to be rounded to float32: e**-|x| by vexp_neg_f32 (0 past
    |x| = 709, where sigmoid rounds to 0 or 1 either way)."""
    e = vexp_neg_f32(abs(x))
    return (1.0 if x >= 0.0 else e) / (1.0 + e)


@scalar
def _silu_of(x, e):
    """x sigmoid(x) given e = e**-|x|: x / (1 + e), or x e / (1 + e) below 0 (one product
    and one quotient, where x times sigmoid64 took 1.2 times as long)."""
    return (x if x >= 0.0 else x * e) / (1.0 + e)


# -- forward --------------------------------------------------------------------------------

@forward_rule("neg")
def _neg(x, a, b):
    return -x


@forward_rule("exp")
def _exp(x, a, b):
    return vexp(x)


@forward_rule("log")
def _log(x, a, b):
    return vlog(x)


@forward_rule("sqrt")
def _sqrt(x, a, b):
    return math.sqrt(x)


@forward_rule("abs")
def _abs(x, a, b):
    return abs(x)


@forward_rule("relu")
def _relu(x, a, b):
    return 0.0 if x <= 0.0 else x          # NaN passes through, -0 becomes +0


@forward_rule("gelu")
def _gelu(x, a, b):
    return x * vphi(x)                  # (Phi by erfc's fit keeps its accuracy for x << 0)


@forward_rule("sigmoid")
def _sigmoid(x, a, b):
    return sigmoid64(x)


@forward_rule("tanh")
def _tanh(x, a, b):
    return vtanh(x)


# -- float32 shortcuts (FORWARD_F32) --------------------------------------------------------

float32_rule("tanh")(vtanh_f32)
float32_rule("exp")(vexp_f32)
float32_rule("exp2")(vexp2_f32)
float32_rule("sigmoid")(sigmoid_f32)


@float32_rule("silu")
def _silu_f32(x):
    return _silu_of(x, vexp_neg_f32(abs(x)))


@float32_rule("gelu")
def _gelu_f32(x):
    return x * vphi_f32(x)


@float32_backward_rule("gelu")
def _gelu_grad_f32(x, y, g):
    return g * (vphi_f32(x) + x * _INV_SQRT_2PI * vexp_neg_f32(0.5 * x * x))


@float32_backward_rule("silu")
def _silu_grad_f32(x, y, g):
    e = vexp_neg_f32(abs(x))        # (sigmoid(x) and sigmoid(-x) from one exponential)
    s = (1.0 if x >= 0.0 else e) / (1.0 + e)
    return g * s * (1.0 + x * ((1.0 if x <= 0.0 else e) / (1.0 + e)))


@float32_backward_rule("softplus")
def _softplus_grad_f32(x, y, g):
    return g if x > SOFTPLUS_THRESHOLD else g * sigmoid_f32(x)


@forward_rule("add_scalar")
def _add_scalar(x, a, b):
    return x + a


@forward_rule("mul_scalar")
def _mul_scalar(x, a, b):
    return x * a


@forward_rule("div_scalar")
def _div_scalar(x, a, b):
    return x / a


@forward_rule("rsub_scalar")
def _rsub_scalar(x, a, b):
    return a - x


@forward_rule("rdiv_scalar")
def _rdiv_scalar(x, a, b):
    return a / x


@forward_rule("pow_scalar")
def _pow_scalar(x, a, b):
    return math.pow(x, a)


@forward_rule("rpow_scalar")
def _rpow_scalar(x, a, b):
    return math.pow(a, x)


@forward_rule("clamp", "hardtanh")
def _clamp(x, a, b):
    y = a if x < a else x      # min(max(x, a), b): b everywhere if a > b; NaN passes through,
    return b if y > b else y   # as in PyTorch


@forward_rule("silu")
def _silu(x, a, b):
    return _silu_of(x, exp_minus_abs(x))


@forward_rule("softplus")
def _softplus(x, a, b):
    if x > SOFTPLUS_THRESHOLD:
        return x
    return (x if x > 0.0 else 0.0) + vlog1p(exp_minus_abs(x))   # nothing overflows


@forward_rule("square")
def _square(x, a, b):
    return x * x               # exact in float64, so rounded once to float32


@forward_rule("sign")
def _sign(x, a, b):
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


@forward_rule("floor")
def _floor(x, a, b):
    return np.floor(x)


@forward_rule("ceil")
def _ceil(x, a, b):
    return np.ceil(x)


@forward_rule("round")
def _round(x, a, b):
    return np.rint(x)          # halves to even


@forward_rule("trunc")
def _trunc(x, a, b):
    return np.trunc(x)


# -- backward -------------------------------------------------------------------------------

@backward_rule("neg", "rsub_scalar")
def _neg_grad(x, y, g, a, b):
    return -g


@backward_rule("add_scalar")
def _pass_grad(x, y, g, a, b):
    return g


@backward_rule("exp")
def _exp_grad(x, y, g, a, b):
    return g * y


@backward_rule("log")
def _log_grad(x, y, g, a, b):
    return g / x


@backward_rule("sqrt")
def _sqrt_grad(x, y, g, a, b):
    return g / (2.0 * y)


@backward_rule("abs")
def _abs_grad(x, y, g, a, b):
    return g * (1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0))


@backward_rule("relu")
def _relu_grad(x, y, g, a, b):
    return 0.0 if x <= 0.0 else g               # (NaN: the gradient, as PyTorch's)


@scalar
def _gaussian(h):
    """exp(-h) for h = x^2 or x^2/2 >= 0 (or NaN): exactly 0 past 800, where libm's is
    (vexp stops at its smallest subnormal, which times an infinite x would not give libm's
    NaN); NaN for NaN."""
    return 0.0 if h >= 800.0 else vexp(-h)


@backward_rule("gelu")
def _gelu_grad(x, y, g, a, b):
    return g * (vphi(x) + x * _INV_SQRT_2PI * _gaussian(0.5 * x * x))


@backward_rule("sigmoid")
def _sigmoid_grad(x, y, g, a, b):
    return g * y * (1.0 - y)


@backward_rule("tanh")
def _tanh_grad(x, y, g, a, b):
    return g * (1.0 - y * y)


@backward_rule("mul_scalar")
def _mul_scalar_grad(x, y, g, a, b):
    return g * a


@backward_rule("div_scalar")
def _div_scalar_grad(x, y, g, a, b):
    return g / a


@backward_rule("rdiv_scalar")
def _rdiv_scalar_grad(x, y, g, a, b):
    return -g * a / (x * x)


@backward_rule("pow_scalar")
def _pow_scalar_grad(x, y, g, a, b):
    return 0.0 if a == 0.0 else g * a * math.pow(x, a - 1.0)


@backward_rule("rpow_scalar")
def _rpow_scalar_grad(x, y, g, a, b):
    return 0.0 if (a == 0.0 and x >= 0.0) else g * y * math.log(a)


@backward_rule("clamp")
def _clamp_grad(x, y, g, a, b):
    return g if (x >= a and x <= b) else 0.0


@backward_rule("hardtanh")
def _hardtanh_grad(x, y, g, a, b):
    return 0.0 if (x <= a or x >= b) else g     # none at the bounds; NaN lets g through


@backward_rule("silu")
def _silu_grad(x, y, g, a, b):
    s = sigmoid64(x)                            # d/dx x s(x) = s(x) (1 + x (1 - s(x)))
    return g * s * (1.0 + x * sigmoid64(-x))


@backward_rule("softplus")
def _softplus_grad(x, y, g, a, b):
    return g if x > SOFTPLUS_THRESHOLD else g * sigmoid64(x)


@backward_rule("square")
def _square_grad(x, y, g, a, b):
    return (x * g) * 2.0       # x g, then doubled (exact here; the shader's order)


@backward_rule("sign", "floor", "ceil", "round", "trunc")
def _zero_grad(x, y, g, a, b):
    return 0.0


# -- more elementwise functions and activations, forward and backward ----------------------

@scalar
def mish_parts(x):
    """(t, 1 - t) for t = tanh(softplus(x)), by t = n / (n + 2) with n = e**x (e**x + 2),
    written in e**-x above 0: no overflow, and 1 - t without cancellation."""
    e = exp_minus_abs(x)
    if x > 0.0:
        n = 1.0 + 2.0 * e
        d = n + 2.0 * e * e
        return n / d, 2.0 * e * e / d
    n = e * (e + 2.0)
    d = n + 2.0
    return n / d, 2.0 / d


@forward_rule("reciprocal")
def _reciprocal(x, a, b):
    return 1.0 / x


@forward_rule("rsqrt")
def _rsqrt(x, a, b):
    return 1.0 / math.sqrt(x) if x != 0.0 else 1.0 / x      # +-0 gives +-inf, as PyTorch


@forward_rule("exp2")
def _exp2(x, a, b):
    return vexp2(x)


@forward_rule("expm1")
def _expm1(x, a, b):
    return vexpm1(x)


@forward_rule("log2")
def _log2(x, a, b):
    return vlog2(x)


@forward_rule("log10")
def _log10(x, a, b):
    return vlog10(x)


@forward_rule("log1p")
def _log1p(x, a, b):
    return vlog1p(x)


@forward_rule("leaky_relu")
def _leaky_relu(x, a, b):
    return x if x > 0.0 else x * a


@forward_rule("elu")
def _elu(x, a, b):
    return x if x > 0.0 else a * vexpm1(x)


@forward_rule("selu")
def _selu(x, a, b):
    return SELU_SCALE * (x if x > 0.0 else SELU_ALPHA * vexpm1(x))


@forward_rule("celu")
def _celu(x, a, b):
    return x if x > 0.0 else a * vexpm1(x / a)


@forward_rule("hardsigmoid")
def _hardsigmoid(x, a, b):
    return _clamp(x + 3.0, 0.0, 6.0) / 6.0


@forward_rule("hardswish")
def _hardswish(x, a, b):
    return x * (_clamp(x + 3.0, 0.0, 6.0) / 6.0)      # (x itself from x = 3 on)


# Float32 shortcuts past float64's divider and square root, which bound these kernels (2.4
# and 3.2 times as fast); the same float32 results for every float32 x
# (tests/test_vmath.py's exhaustive check).
_SIXTH = 1.0 / 6.0


@float32_rule("rsqrt")
def _rsqrt_f32(x):
    """float32's 1 / sqrt(x) (within 2**-23), then two Newton steps in float64 (2**-46,
    then float64's rounding); at +-0 and inf (0 * inf in a step) the seed itself: +-inf, 0."""
    y = np.float64(np.float32(1.0) / np.sqrt(np.float32(x)))
    y1 = y + 0.5 * y * (1.0 - x * y * y)
    y2 = y1 + 0.5 * y1 * (1.0 - x * y1 * y1)
    return y2 if y2 == y2 else y


@scalar
def _sixth_of(p):
    """p / 6 for 0 <= p <= 6, correctly rounded, without a division: the product by
    RN(1/6), corrected by its exact residual (Markstein's)."""
    q = p * _SIXTH
    return q + _SIXTH * (p - 6.0 * q)


@float32_rule("hardsigmoid")
def _hardsigmoid_f32(x):
    return _sixth_of(_clamp(x + 3.0, 0.0, 6.0))


@float32_rule("hardswish")
def _hardswish_f32(x):
    return x * _sixth_of(_clamp(x + 3.0, 0.0, 6.0))


@forward_rule("softsign")
def _softsign(x, a, b):
    return x / (1.0 + abs(x))


@forward_rule("logsigmoid")
def _logsigmoid(x, a, b):
    return (x if x < 0.0 else 0.0) - vlog1p(exp_minus_abs(x))   # -softplus(-x)


@forward_rule("mish")
def _mish(x, a, b):
    return x * mish_parts(x)[0]


@forward_rule("gelu_tanh")
def _gelu_tanh(x, a, b):
    return x * sigmoid64(_GELU_2K * (x + _GELU_C * x * x * x))   # 1 + tanh(u) = 2 s(2u)


@backward_rule("reciprocal")
def _reciprocal_grad(x, y, g, a, b):
    return -(g * y) * y


@backward_rule("rsqrt")
def _rsqrt_grad(x, y, g, a, b):
    return -0.5 * g * y * y * y


@backward_rule("exp2")
def _exp2_grad(x, y, g, a, b):
    return g * (y * _LN2)


@backward_rule("expm1")
def _expm1_grad(x, y, g, a, b):
    return g * vexp(x)            # (not y + 1, which cancels where y is near -1)


@backward_rule("log2")
def _log2_grad(x, y, g, a, b):
    return g / x / _LN2


@backward_rule("log10")
def _log10_grad(x, y, g, a, b):
    return g / x / _LN10


@backward_rule("log1p")
def _log1p_grad(x, y, g, a, b):
    return g / (1.0 + x)


@backward_rule("leaky_relu")
def _leaky_relu_grad(x, y, g, a, b):
    return g if x > 0.0 else g * a


@backward_rule("elu")
def _elu_grad(x, y, g, a, b):
    return g * a * vexp(x) if x <= 0.0 else g        # (PyTorch's: NaN lets g through)


@backward_rule("selu")
def _selu_grad(x, y, g, a, b):
    return g * (SELU_SCALE * SELU_ALPHA) * vexp(x) if x <= 0.0 else g * SELU_SCALE


@backward_rule("celu")
def _celu_grad(x, y, g, a, b):
    return g * vexp(x / a) if x <= 0.0 else g


@backward_rule("hardsigmoid")
def _hardsigmoid_grad(x, y, g, a, b):
    return g / 6.0 if (x > -3.0 and x < 3.0) else 0.0


@backward_rule("hardswish")
def _hardswish_grad(x, y, g, a, b):
    # PyTorch's x/3 + 1/2 as (2x + 3)/6: 2x + 3 is exact where it is near 0 (x near -1.5);
    # at -3 and 3 PyTorch takes the outer pieces' 0 and 1
    if x <= -3.0:
        return 0.0
    return g * ((2.0 * x + 3.0) / 6.0) if x < 3.0 else g


@backward_rule("softsign")
def _softsign_grad(x, y, g, a, b):
    d = 1.0 + abs(x)
    return g / d / d                       # (not g / d^2: d^2 overflows float32 first)


@backward_rule("logsigmoid")
def _logsigmoid_grad(x, y, g, a, b):
    return g * sigmoid64(-x)


@backward_rule("mish")
def _mish_grad(x, y, g, a, b):
    t, one_minus_t = mish_parts(x)         # d/dx x t = t + x sigmoid(x) (1 - t^2)
    return g * (t + x * sigmoid64(x) * (one_minus_t * (1.0 + t)))


@backward_rule("gelu_tanh")
def _gelu_tanh_grad(x, y, g, a, b):
    # d/dx x s(u) = s + x s (1 - s) u', u = 2k (x + c x^3); s and 1 - s each without
    # cancellation
    u = _GELU_2K * (x + _GELU_C * x * x * x)
    s, r = sigmoid64(u), sigmoid64(-u)
    du = _GELU_2K * (1.0 + 3.0 * _GELU_C * x * x)
    return g * (s + x * s * r * du)


# -- maximum and minimum with a number (binary.py's rules, the number as a) -----------------

@forward_rule("maximum_scalar")
def _maximum_scalar(x, a, b):
    return x if (x > a or x != x) else a      # NaN from either side wins


@forward_rule("minimum_scalar")
def _minimum_scalar(x, a, b):
    return x if (x < a or x != x) else a


@backward_rule("maximum_scalar")
def _maximum_scalar_grad(x, y, g, a, b):
    if x == a:
        return 0.5 * g                        # a tie: half to each side, as PyTorch's
    return 0.0 if x < a else g                # (NaN: all of it, as PyTorch's)


@backward_rule("minimum_scalar")
def _minimum_scalar_grad(x, y, g, a, b):
    if x == a:
        return 0.5 * g
    return 0.0 if x > a else g


# -- circular and hyperbolic functions, their inverses, erf and erfc -----------------------

@forward_rule("sin")
def _sin(x, a, b):
    return vsin(x)           # (NaN past vmath.TRIG_LIMIT: the kernel then takes libm's)


@forward_rule("cos")
def _cos(x, a, b):
    return vcos(x)


@forward_rule("tan")
def _tan(x, a, b):
    return vtan(x)


@forward_rule("asin")
def _asin(x, a, b):
    return vasin(x)


@forward_rule("acos")
def _acos(x, a, b):
    return vacos(x)


@forward_rule("atan")
def _atan(x, a, b):
    return vatan(x)


@forward_rule("sinh")
def _sinh(x, a, b):
    return vsinh(x)


@forward_rule("cosh")
def _cosh(x, a, b):
    return vcosh(x)


@forward_rule("asinh")
def _asinh(x, a, b):
    return vasinh(x)


@forward_rule("acosh")
def _acosh(x, a, b):
    return vacosh(x)


@forward_rule("atanh")
def _atanh(x, a, b):
    return vatanh(x)


@forward_rule("erf")
def _erf(x, a, b):
    return verf(x)


@forward_rule("erfc")
def _erfc(x, a, b):
    return verfc(x)


@backward_rule("sin")
def _sin_grad(x, y, g, a, b):
    return g * math.cos(x)


@backward_rule("cos")
def _cos_grad(x, y, g, a, b):
    return -g * math.sin(x)


@backward_rule("tan")
def _tan_grad(x, y, g, a, b):
    return g * (1.0 + y * y)                  # from the result, as PyTorch's


# (1 - x)(1 + x) rather than 1 - x^2, which cancels as |x| -> 1
@backward_rule("asin")
def _asin_grad(x, y, g, a, b):
    return g / math.sqrt((1.0 - x) * (1.0 + x))


@backward_rule("acos")
def _acos_grad(x, y, g, a, b):
    return -g / math.sqrt((1.0 - x) * (1.0 + x))


@backward_rule("atan")
def _atan_grad(x, y, g, a, b):
    return g / (1.0 + x * x)


@backward_rule("sinh")
def _sinh_grad(x, y, g, a, b):
    return g * vcosh(x)


@backward_rule("cosh")
def _cosh_grad(x, y, g, a, b):
    return g * vsinh(x)


@backward_rule("asinh")
def _asinh_grad(x, y, g, a, b):
    return g / math.sqrt(1.0 + x * x)


@backward_rule("acosh")
def _acosh_grad(x, y, g, a, b):
    # PyTorch's 1/sqrt(x^2 - 1), finite below -1 too; + 0.0 makes x = -1's -0 a +0 (+inf)
    return g / math.sqrt((x - 1.0) * (x + 1.0) + 0.0)


@backward_rule("atanh")
def _atanh_grad(x, y, g, a, b):
    return g / ((1.0 - x) * (1.0 + x))


@backward_rule("erf")
def _erf_grad(x, y, g, a, b):
    return g * _2_SQRTPI * _gaussian(x * x)


@backward_rule("erfc")
def _erfc_grad(x, y, g, a, b):
    return -g * _2_SQRTPI * _gaussian(x * x)


_missing = [op.name for op in UNARY if op.code not in FORWARD or op.code not in BACKWARD]
if _missing:
    raise ImportError(f"cpu/unary.py: no forward or backward rule for {_missing}")


# -- kernels: one compiled (and cached) per op; arrays arrive flattened ---------------------

_TRIG = UNARY.codes("sin", "cos", "tan")


@scalar
def _libm_trig(op, x):
    if op == _TRIG[0]:
        return math.sin(x)
    return math.cos(x) if op == _TRIG[1] else math.tan(x)


def _unary_kernel(op):
    def unary_kernel(x, out, a, b):
        for i in range(x.size):
            out[i] = forward(op, np.float64(x[i]), a, b)
        if op == _TRIG[0] or op == _TRIG[1] or op == _TRIG[2]:
            for i in range(x.size):           # past vmath's reduction (and inf, NaN): libm
                if out[i] != out[i]:
                    out[i] = _libm_trig(op, np.float64(x[i]))
    return fma_kernel(unary_kernel)               # exp, sigmoid, tanh: vmath polynomials


def _unary_grad_kernel(op):
    def unary_grad_kernel(x, y, g, out, a, b):
        for i in range(g.size):
            out[i] = backward(op, np.float64(x[i]), np.float64(y[i]), np.float64(g[i]), a, b)
    return fma_kernel(unary_grad_kernel)         # (vmath's polynomials, as the forward's)


def _unary_grad_f32_kernel(op):
    def unary_grad_f32_kernel(x, y, g, out):
        for i in range(g.size):
            out[i] = backward_f32(op, np.float64(x[i]), np.float64(y[i]), np.float64(g[i]))
    return fma_kernel(unary_grad_f32_kernel)


def _unary_f32_kernel(op):
    def unary_f32_kernel(x, out):
        for i in range(x.size):
            out[i] = forward_f32(op, np.float64(x[i]))
    return fma_kernel(unary_f32_kernel)


KERNELS = [_unary_kernel(op.code) for op in UNARY]
F32_KERNELS = {code: _unary_f32_kernel(code) for code in FORWARD_F32}
GRAD_KERNELS = [_unary_grad_kernel(op.code) for op in UNARY]
GRAD_F32_KERNELS = {code: _unary_grad_f32_kernel(code) for code in BACKWARD_F32}


@functools.cache                       # (made at first use: an op and type at a time)
def _unary16_kernel(op, kind):
    """The forward on 16-bit storage (the bits, as uint16): each element widened, the
    float32 kernel's value (its rule's float64 result rounded to float32), rounded to the
    16-bit type: one pass, the same bits as widening, the float32 kernel and rounding."""
    def unary16_kernel(x, out, a, b):
        for i in range(x.size):
            v = np.float64(convert16.from16(x[i], kind))
            y = forward(op, v, a, b)
            if (op == _TRIG[0] or op == _TRIG[1] or op == _TRIG[2]) and y != y:
                y = _libm_trig(op, v)
            out[i] = convert16.to16(np.float32(y), kind)
    return fma_kernel(unary16_kernel)


@functools.cache
def _unary16_grad_kernel(op, kind):
    def unary16_grad_kernel(x, y, g, out, a, b):
        for i in range(g.size):
            d = backward(op, np.float64(convert16.from16(x[i], kind)),
                         np.float64(convert16.from16(y[i], kind)),
                         np.float64(convert16.from16(g[i], kind)), a, b)
            out[i] = convert16.to16(np.float32(d), kind)
    return fma_kernel(unary16_grad_kernel)


# -- entry points ---------------------------------------------------------------------------

def unary(op: str, x: np.ndarray, a: float = 0.0, b: float = 0.0, out=None) -> np.ndarray:
    """y = op(x). The scalar parameters are first rounded to x's dtype, as the GPU gets them.
    Of float16 or bfloat16 storage: each element widened to float32, computed on as the
    float32 kernels compute, the result rounded to nearest even, in one pass (unary.comp's
    LOW kernels in registers); the parameters rounded to float32."""
    if x.dtype in convert16.KIND:
        out = np.empty_like(x) if out is None else out
        a, b = float(np.float32(a)), float(np.float32(b))
        split.run(_unary16_kernel(UNARY.code[op], convert16.KIND[x.dtype]),
                  convert16.bits(x, out), a, b)
        return out
    out = np.empty_like(x) if out is None else out
    a, b = float(x.dtype.type(a)), float(x.dtype.type(b))
    code = UNARY.code[op]
    if code in F32_KERNELS and x.dtype == out.dtype == np.float32:
        split.run(F32_KERNELS[code], (x.reshape(-1), out.reshape(-1)))
        return out
    split.run(KERNELS[code], (x.reshape(-1), out.reshape(-1)), a, b)
    return out


def unary_backward(op: str, x, y, g, a: float = 0.0, b: float = 0.0,
                   out=None) -> np.ndarray:
    """dL/dx of y = op(x), given dL/dy = g; into ``out`` where given (g itself may be)."""
    if g.dtype in convert16.KIND:           # (x, y and g of one 16-bit type: as unary's)
        out = np.empty_like(g) if out is None else out
        a, b = float(np.float32(a)), float(np.float32(b))
        split.run(_unary16_grad_kernel(UNARY.code[op], convert16.KIND[g.dtype]),
                  convert16.bits(x, y, g, out), a, b)
        return out
    out = np.empty_like(g) if out is None else out
    a, b = float(g.dtype.type(a)), float(g.dtype.type(b))
    code = UNARY.code[op]
    flat = (x.reshape(-1), y.reshape(-1), g.reshape(-1), out.reshape(-1))
    if code in GRAD_F32_KERNELS and all(v.dtype == np.float32 for v in flat):
        split.run(GRAD_F32_KERNELS[code], flat)
        return out
    split.run(GRAD_KERNELS[code], flat, a, b)
    return out
