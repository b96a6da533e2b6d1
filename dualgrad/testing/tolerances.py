"""The tolerance table between the backends and the comparison it drives.

The cpu backend defines every result. Its kernels compute each element in float64 and round
once, so for float32 they return the correctly rounded value of the op's formula — except
matrix products (BLAS sgemm, float32 accumulation) and embedding/LayerNorm gradients summed
in float64. The gpu backend computes in float32 under the precision rules of the Vulkan
specification ("Precision and Operation of SPIR-V Instructions"): +, -, * are correctly
rounded; division is within 2.5 ULP; exp within 3 + 2|x| ULP; log within 3 ULP (or 2^-21
absolute inside [0.5, 2]); inversesqrt within 2 ULP, sqrt inherits from 1/inversesqrt.

Each entry below bounds |gpu - cpu| per element and says why. A bound is the sum of:
``ulps`` ULPs of the reference (plus ``ulps_per_x`` more per unit of arg(x), for exp-like
error growth), ``atol`` absolute, ``rel`` * scale, and ``gamma`` * gamma(n) * scale for a
computation of n roundings, where gamma(n) = n u / (1 - n u), u = 2^-24, and scale is the
sum of the magnitudes involved (|A| @ |B| for a product): the classical forward error bound
of a sum in any order (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1).
The caller supplies x, scale and n as each entry's reason describes. ``exact`` entries
must agree bit for bit (NaNs of any payload count as equal). Never widen an entry to make a
test pass without writing down here why the wider bound is right.

One allowance is the device's, not the op's: Vulkan lets any operation flush subnormal
inputs and results to zero unless the shader asks for DenormPreserve, which the gpu backend
does wherever the device supports it (NVIDIA's drivers do not, for float32). On such a
device a subnormal reference result may come back as a zero (``flushes_subnormals=True``),
and so may a normal one whose bound reaches below FLT_MIN. And one is the format's: at the
overflow threshold a result within its bound may round to inf on one backend and stay
finite on the other; such a pair is measured from FLT_MAX plus half an ULP, where rounding
to inf begins.
"""
from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np

from ..kernel_ops import INT_REDUCE, INTEGER, LOGIC

U32 = 2.0 ** -24          # unit roundoff of float32


# How an op's error grows with its input: ``ulps_per_x`` more ULPs per unit of arg(x).
ARGS = {
    "abs": np.abs,                                 # exp(x): Vulkan's 3 + 2|x| ULP
    "half_square": lambda x: 0.5 * np.square(x),   # exp(-x^2/2) inside the normal CDF/PDF
    "square": np.square,                           # exp(-x^2) inside erf, erfc and erf'
}


@dataclasses.dataclass(frozen=True)
class Tolerance:
    reason: str
    exact: bool = False
    ulps: float = 0.0
    ulps_per_x: float = 0.0
    arg: str = "abs"
    atol: float = 0.0
    gamma: float = 0.0
    rel: float = 0.0
    # Where the differential check draws a unary op's input, and whether special values
    # (signed zeros, subnormals, huge values, inf, NaN) are among them.
    domain: tuple = (-4.0, 4.0)
    specials: bool = True
    # The 16-bit type ("bfloat16" or "float16") both backends round the result to, where
    # they do: one unit of it more, and its overflow threshold in place of float32's.
    rounded_to: str = ""

    def describe(self) -> str:
        """The bound in a few symbols, e.g. ``"3 ULP + 2|x| ULP + gamma(n)*S"``."""
        if self.exact:
            return "exact"
        x = {"abs": "|x|", "half_square": "x^2/2", "square": "x^2"}[self.arg]
        terms = [f"{self.ulps:g} ULP" if self.ulps else "",
                 f"{self.ulps_per_x:g}*{x} ULP" if self.ulps_per_x else "",
                 f"{self.atol:.2g}" if self.atol else "",
                 f"{self.gamma:g}*gamma(n)*S" if self.gamma else "",
                 f"{self.rel:.2g}*S" if self.rel else ""]
        terms.append(f"1 ULP of {self.rounded_to}" if self.rounded_to else "")
        return " + ".join(t for t in terms if t)


def gamma(n) -> np.ndarray:
    """Higham's gamma_n for float32: the relative error bound of an n-term sum."""
    nu = np.asarray(n, dtype=np.float64) * U32
    return nu / np.maximum(1.0 - nu, 1e-300)


# matmul_f16x3.comp scales each row of op(A) and column of op(B) by a power of two before
# it splits them into float16 pieces, so a value far below its row's largest keeps only
# float16's subnormal step of it: 2^-38 (max_k |a_mk| |b_kn| + |a_mk| max_k |b_kn|) a term
# at most, beside 12u |a_mk b_kn| (matmul_tc.glsl). The "matmul" bound takes it into S.
FLOOR_WEIGHT = 2.0 ** -22


def product_scale(a, b) -> np.ndarray:
    """S for the "matmul" bound of op(A) @ op(B) (``a``, ``b`` as multiplied, batched or
    not): |A| @ |B| + FLOOR_WEIGHT (max_k |a_mk| sum_k |b_kn| + sum_k |a_mk| max_k |b_kn|),
    the maxima over finite values as the split takes them. With gamma(K) >= 2^-16 (tensor
    cores take K >= 256) the bound's 2 gamma(K) S then covers the 2^-38 floor per term."""
    a, b = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    with np.errstate(invalid="ignore"):
        row_max = np.where(np.isfinite(a), a, 0).max(axis=-1, initial=0.0)
        col_max = np.where(np.isfinite(b), b, 0).max(axis=-2, initial=0.0)
        floor = (row_max[..., :, None] * b.sum(axis=-2)[..., None, :]
                 + a.sum(axis=-1)[..., :, None] * col_max[..., None, :])
        return np.matmul(a, b) + FLOOR_WEIGHT * floor


_EXACT_ADD = "IEEE +, -, * are correctly rounded on both (Vulkan requires it); one operation"
_EXACT_MOVE = "data movement or a selection: no arithmetic"
_ROUNDING = ("floor", "ceil", "round", "trunc")
_TO_INTEGER = ("rounding a float32 to an integral float32 is exact (GLSL's floor, ceil, trunc, "
               "roundEven; NumPy's on the cpu)")
_OPTIM = "one fused update from the same state; "
_DIV = "OpFDiv is within 2.5 ULP in Vulkan; the cpu division is correctly rounded"
_QUOTIENT = ("an integer quotient: the same integer on both while below 2^29 (the cpu's float64 "
             "(x - fmod(x, y)) / y is exact there), rounded once to float32; past it the "
             "cpu's float64 quotient and the device's (exact below 2^31, else a quotient of "
             "significands within 2.5 ULP) may round apart")
_REDUCED = ("|x| = q pi/2 + r, below 6000 by Cody and Waite's reduction (pi/2 in five parts, "
            "q times each exact, each difference rounded at most once at r's scale: about 2 "
            "ULP), above by Payne and Hanek's in integers (short by less than 2^-70 of a "
            "quadrant: r within about 2 ULP from the fraction's conversion and the product "
            "by pi/2); either way r keeps its relative accuracy for every float32 x")
_SQRT_SLOPE = ("g / sqrt(d), d formed as (1 - x)(1 + x) or 1 + x^2 (two roundings): the "
               "square root within 1 ULP (d inversesqrt(d) and a Newton step), halved in the "
               "result; a 2.5 ULP division")
_ERF_SLOPE = ("g 2/sqrt(pi) exp(-x^2): exp's 3 + 2x^2 ULP (x^2 exact as sq + lo), the "
              "constant and three products; results below FLT_MIN lose relative accuracy "
              "(a subnormal product rounded twice)")

TOLERANCES: dict = {
    # -- unary forward --------------------------------------------------------------------
    "unary:neg": Tolerance(_EXACT_MOVE, exact=True),
    "unary:abs": Tolerance(_EXACT_MOVE, exact=True),
    "unary:relu": Tolerance(_EXACT_MOVE, exact=True),
    "unary:clamp": Tolerance(_EXACT_MOVE, exact=True),
    "unary:add_scalar": Tolerance(_EXACT_ADD, exact=True),
    "unary:mul_scalar": Tolerance(_EXACT_ADD, exact=True),
    "unary:rsub_scalar": Tolerance(_EXACT_ADD, exact=True),
    "unary:div_scalar": Tolerance(_DIV, ulps=3),
    "unary:rdiv_scalar": Tolerance(_DIV + "; drawn away from 0, without specials: Vulkan bounds "
                                   "a division only for denominators in [2^-126, 2^126]",
                                   ulps=3, domain=(0.2, 5.0), specials=False),
    "unary:exp": Tolerance("Vulkan's exp is within 3 + 2|x| ULP", ulps=3, ulps_per_x=2,
                           domain=(-20.0, 20.0)),
    "unary:log": Tolerance("Vulkan's log is within 3 ULP, or 2^-21 absolute in [0.5, 2]",
                           ulps=3, atol=2.0 ** -21, domain=(0.01, 50.0)),
    "unary:sqrt": Tolerance("sqrt inherits 1/inversesqrt: 2 ULP, then a 2.5 ULP division",
                            ulps=5, domain=(0.0, 50.0)),
    "unary:tanh": Tolerance("a Taylor polynomial below 0.4 (~2 ULP of rounding), else "
                            "(1 - e)/(1 + e) with e = exp(-2|x|): e's 3 + 4|x| ULP are damped "
                            "by 2e/(1 - e^2) <= 0.9 (e <= 0.45 and shrinking), plus a 2.5 ULP "
                            "division and two roundings", ulps=8, domain=(-6.0, 6.0)),
    "unary:sigmoid": Tolerance("1/(1 + exp(-x)) for x >= 0 (exp's error damped by e/(1+e)), "
                               "exp(x)/(1 + exp(x)) below: exp's 3 + 2|x| ULP pass through, "
                               "plus a 2.5 ULP division", ulps=7, ulps_per_x=2,
                               domain=(-30.0, 30.0)),
    "unary:gelu": Tolerance("x * Phi(x), Phi from a Chebyshev erfc fit (1.2e-7 relative, "
                            "~2 ULP) times exp(-x^2/2 + poly) with exp's 3 + 2|arg| ULP, plus "
                            "|arg| ULP more because arg itself is a rounded float32 sum (the "
                            "square is exact); a few roundings; results that underflow "
                            "carry no relative accuracy", ulps=12, ulps_per_x=3,
                            arg="half_square", atol=1e-30, domain=(-9.0, 9.0)),
    "unary:pow_scalar": Tolerance("exp2(y log2 x): exp2's 3 + 2|t| ULP, with arg = t = "
                                  "y log2 x (the caller passes t), plus log2's 2^-21 "
                                  "absolute error scaled by |y| ln2 / u; drawn where GLSL "
                                  "defines pow (x > 0), without specials", ulps=8,
                                  ulps_per_x=2, domain=(0.05, 4.0), specials=False),
    "unary:rpow_scalar": Tolerance("as pow_scalar (t = x log2 a)", ulps=8, ulps_per_x=2,
                                   specials=False),
    "unary:silu": Tolerance("x sigmoid(x): sigmoid's 7 + 2|x| ULP (exp's 3 + 2|x| through a "
                            "2.5 ULP division), then one rounding", ulps=8, ulps_per_x=2,
                            domain=(-30.0, 30.0)),
    "unary:softplus": Tolerance("max(x, 0) + log1p(e), e = exp(-|x|): exp's 3 + 2|x| ULP pass "
                                "through log1p (whose result is about e where e is small); "
                                "log1p from its atanh series, a 2.5 ULP division and a few "
                                "roundings (~5 ULP); x itself past 20 on both",
                                ulps=8, ulps_per_x=2, domain=(-30.0, 30.0)),
    "unary:square": Tolerance(_EXACT_ADD, exact=True),
    "unary:sign": Tolerance(_EXACT_MOVE, exact=True),
    **{f"unary:{op}": Tolerance(_TO_INTEGER, exact=True) for op in _ROUNDING},
    "unary:hardtanh": Tolerance(_EXACT_MOVE, exact=True),
    "unary:maximum_scalar": Tolerance(_EXACT_MOVE, exact=True),
    "unary:minimum_scalar": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:maximum_scalar": Tolerance("g, g/2 or 0: exact", exact=True),
    "unary_backward:minimum_scalar": Tolerance("g, g/2 or 0: exact", exact=True),
    # trig.glsl's forms; subnormal results carry no relative accuracy (2 subnormal ULPs)
    "unary:sin": Tolerance(_REDUCED + ", then Cephes' polynomial on [-pi/4, pi/4] (about 1 "
                           "ULP)", ulps=4, domain=(-100.0, 100.0)),
    "unary:cos": Tolerance(_REDUCED + ", then Cephes' polynomial (about 1 ULP)", ulps=4,
                           domain=(-100.0, 100.0)),
    "unary:tan": Tolerance(_REDUCED + "; sin(r) / cos(r) (or -cos/sin): each polynomial's "
                           "~3 ULP and a 2.5 ULP division", ulps=9, domain=(-100.0, 100.0)),
    "unary:asin": Tolerance("Cephes' polynomial (~1 ULP) below 0.5; above, pi/2 - 2 asin(s), "
                            "s = sqrt((1 - |x|)/2) within 1 ULP (a Newton step; 1 - |x| is "
                            "exact), doubled where pi/2 - 2 asin(s) cancels to pi/6, pi/2 as "
                            "hi + lo", ulps=6, domain=(-1.0, 1.0)),
    "unary:acos": Tolerance("as asin: 2 asin(s) above 0.5, pi - 2 asin(s) below -0.5, "
                            "pi/2 - asin(x) between (pi/2, pi as hi + lo)", ulps=6,
                            domain=(-1.0, 1.0)),
    "unary:atan": Tolerance("Cephes' reduction: -1/x (a 2.5 ULP division) or (x - 1)/(x + 1) "
                            "(a rounding and a division), whose error reaches a result at "
                            "least as large, where pi/4 + atan(t) cancels at most by half; a "
                            "~1 ULP polynomial", ulps=7, domain=(-10.0, 10.0)),
    "unary:sinh": Tolerance("e = e^|x|/2 from exp(|x|) (3 + 2|x| ULP; past 88 "
                            "exp(|x| - 80) e^80/2, less), then e - 1/(4e) (a 2.5 ULP division, cancelling at "
                            "most 1.2 times from |x| = 1) and two roundings; a Taylor "
                            "polynomial below 1 (~2 ULP)", ulps=10, ulps_per_x=2.5,
                            domain=(-90.0, 90.0)),
    "unary:cosh": Tolerance("e + 1/(4e), e = e^|x|/2 as for sinh, without cancellation",
                            ulps=9, ulps_per_x=2, domain=(-90.0, 90.0)),
    "unary:asinh": Tolerance("up to 1, x + x z P(z), z = x^2, P a degree-8 fit (0.8 ULP "
                             "with its roundings); above, log (3 ULP) of |x| + sqrt(x^2 + 1) "
                             "(~2 ULP from the sum and sqrt's 1 ULP) over a result >= 0.88; "
                             "log|x| + ln2 past 1e18", ulps=8, domain=(-50.0, 50.0)),
    "unary:acosh": Tolerance("up to 2, sqrt(2t) R(t), t = x - 1 exact, R a degree-7 fit "
                             "(~2 ULP with sqrt's 1 ULP and the product); above, log (3 ULP) "
                             "of x + sqrt(x^2 - 1) (~2 ULP) over a result >= 1.3; log x + ln2 "
                             "past 1e18", ulps=8, domain=(1.0, 50.0)),
    "unary:atanh": Tolerance("log1p (5 ULP) of 2|x|/(1 - |x|) (1 - |x| exact near 1; a 2.5 ULP "
                             "division, damped by log1p's slope), halved exactly", ulps=8,
                             domain=(-1.0, 1.0)),
    "unary:erf": Tolerance("a Taylor polynomial below 0.5 (~3 ULP of roundings); to 3.92, "
                           "1 - exp(-x^2 + q(x)), q a degree-10 fit of log(erfc) + x^2 "
                           "(1.2 ULP with an exact exp), exp's 3 + 2|arg| ULP of erfc < erf "
                           "(at most ~3 ULP of erf); 1 from 3.92",
                           ulps=12, ulps_per_x=3, arg="square", atol=2.0 ** -148,
                           domain=(-10.0, 10.0)),
    "unary:erfc": Tolerance("t exp(fit(t) - x^2), Numerical Recipes' fit (1.2e-7, ~2 ULP) "
                            "moved by t's 2.5 ULP division; exp's 3 + 2|arg| ULP and |arg| "
                            "ULP more for rounding arg (x^2's own rounding is corrected: "
                            "x^2 = sq + lo by an fma); 2 - erfc(-x) below 0, in [1, 2]",
                            ulps=12, ulps_per_x=3, arg="square", atol=2.0 ** -148,
                            domain=(-10.0, 10.0)),
    "unary_backward:sin": Tolerance("g cos(x): cos's bound and a product", ulps=5),
    "unary_backward:cos": Tolerance("-g sin(x): sin's bound and a product", ulps=5),
    "unary_backward:tan": Tolerance("g (1 + y^2) from the given y: three roundings", ulps=3),
    "unary_backward:asin": Tolerance(_SQRT_SLOPE, ulps=5),
    "unary_backward:acos": Tolerance(_SQRT_SLOPE, ulps=5),
    "unary_backward:atan": Tolerance("g / (1 + x^2): two roundings and a 2.5 ULP division "
                                     "(past |x| = 2^63 the divisor exceeds 2^126, where "
                                     "Vulkan bounds no division, and the result is below "
                                     "|g| 2^-126: a subnormal)", ulps=4),
    "unary_backward:sinh": Tolerance("g cosh(x): cosh's bound and a product; past 88 "
                                     "(g exp(|x| - 80)) e^80/2 (exp's bound, two "
                                     "roundings)", ulps=10,
                                     ulps_per_x=2),
    "unary_backward:cosh": Tolerance("g sinh(x): sinh's bound and a product; past 88 as "
                                     "sinh's gradient", ulps=11,
                                     ulps_per_x=2.5),
    "unary_backward:asinh": Tolerance(_SQRT_SLOPE + "; past 1e18 g / |x| as (g / s) / s, "
                                      "s = sqrt|x| (1 ULP, twice) and two 2.5 ULP divisions",
                                      ulps=7),
    "unary_backward:acosh": Tolerance("(g / sqrt|x - 1|) / sqrt|x + 1| (no divisor past "
                                      "2^126): each sqrt within 1 ULP (halved in the result), "
                                      "a rounding and two 2.5 ULP divisions", ulps=7),
    "unary_backward:atanh": Tolerance("g / ((1 - x)(1 + x)): three roundings and a 2.5 ULP "
                                      "division", ulps=5),
    "unary_backward:erf": Tolerance(_ERF_SLOPE, ulps=6, ulps_per_x=2, arg="square",
                                    atol=2.0 ** -147),
    "unary_backward:erfc": Tolerance(_ERF_SLOPE, ulps=6, ulps_per_x=2, arg="square",
                                     atol=2.0 ** -147),
    "unary:reciprocal": Tolerance(_DIV + "; drawn away from 0, without specials (its "
                                  "gradient's float32 y^2 overflows where the cpu's float64 "
                                  "does not)", ulps=3, domain=(0.2, 5.0), specials=False),
    "unary:rsqrt": Tolerance("inversesqrt is within 2 ULP; drawn away from 0, without "
                             "specials (a device that flushes subnormal inputs makes their "
                             "rsqrt inf, and the gradient's y^3 would overflow)", ulps=3,
                             domain=(0.05, 50.0), specials=False),
    "unary:exp2": Tolerance("Vulkan's exp2 is within 3 + 2|x| ULP", ulps=3, ulps_per_x=2,
                            domain=(-20.0, 20.0)),
    "unary:expm1": Tolerance("exp(x) - 1 from |x| = ln2/2 on: exp's 3 + 2|x| ULP, amplified by "
                             "e^x / |e^x - 1| (3.4 at ln2/2, toward 1 as x grows, below 2.4 "
                             "for x < 0), plus the subtraction's rounding; a Taylor "
                             "polynomial nearer 0 (~2 ULP)", ulps=14, ulps_per_x=3,
                             domain=(-20.0, 20.0)),
    "unary:log2": Tolerance("Vulkan's log2 is within 3 ULP, or 2^-21 absolute in [0.5, 2]",
                            ulps=3, atol=2.0 ** -21, domain=(0.01, 50.0)),
    "unary:log10": Tolerance("log2(x) log10(2): log2's 3 ULP (or 2^-21 absolute in [0.5, 2], "
                             "then scaled by 0.30) and one rounding", ulps=4, atol=2.0 ** -21,
                             domain=(0.01, 50.0)),
    "unary:log1p": Tolerance("2 atanh(x / (2 + x)) by its series on [-0.5, 1]: the quotient's "
                             "3 ULP (2 + x rounded, a 2.5 ULP division) pass through, plus the "
                             "series' roundings; log(1 + x) outside: log's 3 ULP and 1 + x's "
                             "rounding, below 0.75 ULP of a result >= log 2", ulps=5,
                             domain=(-0.99, 20.0)),
    "unary:leaky_relu": Tolerance("x, or one product a x: exact", exact=True),
    "unary:elu": Tolerance("a expm1(x) below 0: expm1's bound there (exp's 3 + 2|x| ULP, "
                           "amplified at most 2.4 times, near -ln2/2) and one rounding",
                           ulps=10, ulps_per_x=2),
    "unary:selu": Tolerance("as elu, with the float32 constants' rounding and one product "
                            "more", ulps=11, ulps_per_x=2),
    "unary:celu": Tolerance("a expm1(t), t = x / a (the caller passes t): the division's "
                            "2.5 ULP carry 2.5|t| ULP into exp, whose own 3 + 2|t| ULP are "
                            "amplified at most 2.4 times (near t = -ln2/2, below 0.6 from "
                            "|t| = 1 on)", ulps=12, ulps_per_x=5),
    "unary:hardsigmoid": Tolerance("(x + 3) clamped, then / 6: x + 3 rounds once (exact near "
                                   "-3, by Sterbenz, so no cancellation), then a 2.5 ULP "
                                   "division", ulps=4),
    "unary:hardswish": Tolerance("x ((x + 3) / 6): x + 3's rounding, a 2.5 ULP division, one "
                                 "product (x itself from 3 on)", ulps=5),
    "unary:softsign": Tolerance("x / (1 + |x|): one rounding and a 2.5 ULP division (+-1 past "
                                "|x| = 1e8, where the quotient rounds to it; NaN at +-inf, as "
                                "inf / inf)", ulps=4),
    "unary:logsigmoid": Tolerance("min(x, 0) - log1p(e), e = exp(-|x|): as softplus", ulps=8,
                                  ulps_per_x=2, domain=(-30.0, 30.0)),
    "unary:mish": Tolerance("x t, t = n / (n + 2) from e = exp(-|x|): exp's 3 + 2|x| ULP pass "
                            "into t at most once (d ln t / d ln e <= 1), plus a 2.5 ULP "
                            "division and a few roundings", ulps=8, ulps_per_x=2,
                            domain=(-30.0, 30.0)),
    "unary:gelu_tanh": Tolerance("x sigmoid(u), u = 2k (x + c x^3) (the caller passes u): u's "
                                 "four roundings carry 4|u| ULP into exp, sigmoid's own "
                                 "7 + 2|u| ULP; results that underflow carry no relative "
                                 "accuracy", ulps=8, ulps_per_x=6, atol=1e-30,
                                 domain=(-9.0, 9.0)),
    # -- unary backward -------------------------------------------------------------------
    "unary_backward:neg": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:abs": Tolerance("g * sign(x): exact", exact=True),
    "unary_backward:relu": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:clamp": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:hardtanh": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:square": Tolerance("(x g) 2: one correctly rounded product, then an exact "
                                       "doubling (the cpu rounds 2xg once); they part only "
                                       "where x g is subnormal, by 1 ULP", ulps=1),
    **{f"unary_backward:{op}": Tolerance("the constant 0", exact=True)
       for op in ("sign", *_ROUNDING)},
    "unary_backward:add_scalar": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:rsub_scalar": Tolerance(_EXACT_MOVE, exact=True),
    "unary_backward:mul_scalar": Tolerance(_EXACT_ADD, exact=True),
    "unary_backward:exp": Tolerance("g * y: one product of stored values", exact=True),
    "unary_backward:div_scalar": Tolerance(_DIV, ulps=3),
    "unary_backward:log": Tolerance(_DIV, ulps=3),
    "unary_backward:sqrt": Tolerance("g / (2 y): one 2.5 ULP division", ulps=3),
    "unary_backward:rdiv_scalar": Tolerance("-g a / (x x): two roundings and a division",
                                            ulps=5),
    "unary_backward:tanh": Tolerance("g (1 - y^2): 1 - y^2 cancels as |y| -> 1, so the bound "
                                     "is relative to g, not to the result", ulps=3,
                                     atol=4 * U32),
    "unary_backward:sigmoid": Tolerance("g y (1 - y): 1 - y cancels as y -> 1 (bound relative "
                                        "to g)", ulps=3, atol=2 * U32),
    "unary_backward:gelu": Tolerance("Phi(x) + x phi(x): the erfc fit (~2 ULP), exp's "
                                     "3 + x^2 ULP in phi, and cancellation between the two "
                                     "terms for x < 0 (bound relative to g)", ulps=12,
                                     ulps_per_x=4, arg="half_square", atol=8 * U32),
    "unary_backward:pow_scalar": Tolerance("g a x^(a-1): pow's bound plus two roundings",
                                           ulps=10, ulps_per_x=2),
    "unary_backward:rpow_scalar": Tolerance("g y log(a): log's 3 ULP, or its 2^-21 absolute "
                                            "error in [0.5, 2] (relative to scale = |g y|), "
                                            "plus two roundings", ulps=6, rel=2.0 ** -20),
    "unary_backward:silu": Tolerance("g s (1 + x (1 - s)), s and 1 - s each from exp(-|x|) "
                                     "(7 + 2|x| ULP): relative to the result where nothing "
                                     "cancels; 1 + x (1 - s) cancels near x = -1.28 (silu's "
                                     "minimum), where the terms' error, 12u of S = |g x s|, "
                                     "is allowed besides", ulps=12, ulps_per_x=2,
                                     rel=12 * U32),
    "unary_backward:reciprocal": Tolerance("-(g y) y: two roundings", ulps=2),
    "unary_backward:rsqrt": Tolerance("-0.5 g y^3: three roundings", ulps=2),
    "unary_backward:exp2": Tolerance("g (y ln2): two roundings and ln2's (a float32 constant)",
                                     ulps=2),
    "unary_backward:expm1": Tolerance("g exp(x): exp's 3 + 2|x| ULP and one rounding",
                                      ulps=4, ulps_per_x=2),
    "unary_backward:log2": Tolerance("g / x log2(e): a 2.5 ULP division, a rounding and the "
                                     "constant's", ulps=4),
    "unary_backward:log10": Tolerance("(g log10(e)) / x: a rounding, the constant's and a 2.5 "
                                      "ULP division", ulps=4),
    "unary_backward:log1p": Tolerance("g / (1 + x): one rounding and a 2.5 ULP division",
                                      ulps=4),
    "unary_backward:leaky_relu": Tolerance("g, or one product g a: exact", exact=True),
    "unary_backward:elu": Tolerance("g a exp(x) below 0: exp's 3 + 2|x| ULP and two "
                                    "roundings", ulps=5, ulps_per_x=2),
    "unary_backward:selu": Tolerance("as elu, with the float32 constants' rounding", ulps=6,
                                     ulps_per_x=2),
    "unary_backward:celu": Tolerance("g exp(t), t = x / a: the division's 2.5|t| ULP, exp's "
                                     "3 + 2|t| ULP, one rounding", ulps=4, ulps_per_x=5),
    "unary_backward:hardsigmoid": Tolerance(_DIV, ulps=3),
    "unary_backward:hardswish": Tolerance("g (2x + 3) / 6: 2x + 3 exact near its zero "
                                          "(Sterbenz), else 0.5 ULP; a 2.5 ULP division and "
                                          "a product", ulps=4),
    "unary_backward:softsign": Tolerance("g / d / d, d = 1 + |x|: d's rounding (twice) and "
                                         "two 2.5 ULP divisions", ulps=7),
    "unary_backward:logsigmoid": Tolerance("g sigmoid(-x): exp's 3 + 2|x| ULP, a 2.5 ULP "
                                           "division, one rounding", ulps=7, ulps_per_x=2),
    "unary_backward:mish": Tolerance("t + x sigmoid(x) (1 - t)(1 + t), each factor from "
                                     "exp(-|x|) (7 + 2|x| ULP): relative to the result where "
                                     "nothing cancels; the sum cancels near x = -1.19 (mish's "
                                     "minimum), where the terms' error, 12u of S = |g y|, is "
                                     "allowed besides", ulps=12, ulps_per_x=2, rel=12 * U32),
    "unary_backward:gelu_tanh": Tolerance("s + x s (1 - s) u': s and 1 - s each from "
                                          "exp(-|u|) (7 + 6|u| ULP with u's roundings); "
                                          "cancels near x = -0.75 (the minimum), where 16u "
                                          "of S = |g y| is allowed besides", ulps=12,
                                          ulps_per_x=6, rel=16 * U32),
    "unary_backward:softplus": Tolerance("g sigmoid(x): sigmoid's 7 + 2|x| ULP and one "
                                         "rounding; g itself past 20 on both", ulps=8,
                                         ulps_per_x=2),
    # -- binary ---------------------------------------------------------------------------
    "binary:add": Tolerance(_EXACT_ADD, exact=True),
    "binary:sub": Tolerance(_EXACT_ADD, exact=True),
    "binary:mul": Tolerance(_EXACT_ADD, exact=True),
    "binary:maximum": Tolerance(_EXACT_MOVE, exact=True),
    "binary:minimum": Tolerance(_EXACT_MOVE, exact=True),
    "binary:div": Tolerance(_DIV, ulps=3),
    "binary:pow": Tolerance("exp2(y log2 x), as pow_scalar", ulps=8, ulps_per_x=2),
    "binary:atan2": Tolerance("atan of min/max (a division, within 2.5 ULP, then atan's "
                              "polynomial), past tan(pi/8) pi/4 + atan((min - max)/(min + "
                              "max)) (a rounding on each side, a division; the sum at least "
                              "pi/8, |atan| at most pi/8: ~5 ULP), and one reflection about "
                              "pi/2 or pi, formed from two-part constants: the result is at "
                              "least pi/4 there, so neither reflection cancels", ulps=6),
    "binary:fmod": Tolerance("long division of the integer significands on the device, C's "
                             "fmod on the cpu: both exact", exact=True),
    "binary:remainder": Tolerance("fmod, then |y| - r in y's units (exact on both); where "
                                  "|x| < |y| y + x, correctly rounded on both, but on the "
                                  "device formed of significands, so a subnormal result is "
                                  "rounded twice", ulps=1),
    "binary:floor_divide": Tolerance(_QUOTIENT, ulps=3),
    "binary_backward:add": Tolerance(_EXACT_MOVE, exact=True),
    "binary_backward:sub": Tolerance(_EXACT_MOVE, exact=True),
    "binary_backward:mul": Tolerance("g * other: one product", exact=True),
    "binary_backward:maximum": Tolerance("g, 0 or g/2: exact", exact=True),
    "binary_backward:atan2": Tolerance("g x / (x^2 + y^2) on operands scaled by a power of two "
                                       "(exact): a sum of two squares, a division (2.5 ULP) "
                                       "and the product with g", ulps=6),
    "binary_backward:minimum": Tolerance("g, 0 or g/2: exact", exact=True),
    "binary_backward:fmod": Tolerance("g, and -g q with q the truncated quotient (" + _QUOTIENT
                                      + "): one product", ulps=4),
    "binary_backward:remainder": Tolerance("g, and -g q with q the floored quotient (" +
                                           _QUOTIENT + "): one product", ulps=4),
    "binary_backward:floor_divide": Tolerance("zeros (a step function)", exact=True),
    "binary_backward:div": Tolerance("g / y and -g x / (y y): a division after up to two "
                                     "roundings", ulps=6),
    "binary_backward:pow": Tolerance("pow's bound plus two roundings; the exponent's gradient "
                                     "g x^y log(x) also carries log's 2^-21 absolute error in "
                                     "[0.5, 2] (relative to scale = |g x^y|)", ulps=12,
                                     ulps_per_x=2, rel=2.0 ** -20),
    # -- reductions and products ----------------------------------------------------------
    "reduce:sum": Tolerance("a float32 sum of n terms in any order is within gamma(n) of "
                            "the sum of magnitudes; the cpu sums in float64 and rounds once",
                            ulps=1, gamma=1),
    "reduce:mean": Tolerance("the sum's bound, then a 2.5 ULP division by n", ulps=4, gamma=1),
    "reduce:max": Tolerance("a selection: exact in any order", exact=True),
    "reduce:min": Tolerance("a selection: exact in any order", exact=True),
    "reduce:sum_squares": Tolerance("each square rounds once on the gpu (within u of x^2, "
                                    "so gamma(n + 1) of the sum of squares S with the sum's "
                                    "n terms: the check's length is n + 1); about a center "
                                    "c, x - c rounds too (gamma(3) of (x - c)^2 a term: "
                                    "length n + 3); the cpu squares and adds in float64 and "
                                    "rounds once; 2^-100 for squares under float32's normal "
                                    "range, which a device may flush (each below 1.2e-38, at "
                                    "most 2^17 of them)",
                                    ulps=1, gamma=1, atol=2.0 ** -100),
    "reduce:var": Tolerance("each share of a run (a workgroup thread's m elements, or a "
                            "thread item's whole run) sums its squares about a center c as "
                            "sum_squares' (gamma(m + 3) of T = M2_s + m (c - mean_s)^2) and "
                            "removes sum(x - c)^2 / m (2 gamma T at most); c is one of the "
                            "share's elements (T <= (m + 1) M2_s, and plans.VAR_RUN keeps "
                            "(m + 3)(m + 1) <= n + 3) or its float32 mean (within e = "
                            "gamma(n + 1) sum|x| / n: T <= M2 + n e^2); Chan's merges of "
                            "shares add non-negative terms whose delta is as accurate (a "
                            "gamma more): 4 gamma(n + 3) of M2 + n e^2 (the check's S, over "
                            "the divisor); then the division and the cpu's one rounding",
                            ulps=2, gamma=4),
    "reduce:sum_exp": Tolerance("each term exp(x - c) errs by Vulkan's 3 + 2|d| ULP (d = "
                                "x - c) and d's rounding (|d| u absolute: |d| / 2 ULP of the "
                                "term), then a float32 sum of n terms: the check's S is "
                                "sum exp(d) (4 + 2.5|d|), so gamma(n) S bounds both; the cpu "
                                "forms each term in float64; 2^-100 for terms under "
                                "float32's normal range, which a device may flush", ulps=1,
                                gamma=1, atol=2.0 ** -100),
    "reduce:prod": Tolerance("a float32 product of n terms in any order is within gamma(n) "
                             "of the exact one, relative (scale = |product|), while no partial "
                             "product leaves the normal range; the cpu multiplies in float64 "
                             "and rounds once", ulps=1, gamma=1),
    **{f"logic:{op}": Tolerance("a comparison or a test: exact (IEEE: NaN unordered)",
                                exact=True) for op in LOGIC.names},
    **{f"integer:{op}": Tolerance("int32 arithmetic, wrapping: exact", exact=True)
       for op in INTEGER.names},
    **{f"int_reduce:{op}": Tolerance("int32 sums (wrapping), maxima or minima, in any "
                                     "order (associative): exact", exact=True)
       for op in INT_REDUCE.names},
    "where": Tolerance(_EXACT_MOVE, exact=True),
    "argreduce": Tolerance("comparisons in any order, ties to the lower index: exact",
                           exact=True),
    "cast": Tolerance("truncation toward zero, saturated; an int32 to float32 rounds to "
                      "nearest even on both (a correctly rounded conversion)", exact=True),
    "convert16": Tolerance("float32 to float16 or bfloat16 rounds to nearest even on both "
                           "(NumPy's and ml_dtypes' conversions; the shader's in integer "
                           "arithmetic on the bits, so no flushing touches subnormals), "
                           "and back is exact", exact=True),
    "sort": Tolerance("(key, index) pairs are distinct, so the sorted order is one answer, "
                      "and the values are moved as bits: exact", exact=True),
    "searchsorted": Tolerance("integer indices from comparisons (keys on the device, so "
                              "subnormals order as on the cpu), each step the same: exact",
                              exact=True),
    "cumsum": Tolerance("each output a float32 sum of up to n terms (the device adds in chunks, "
                        "then the chunks' totals): within gamma(n) of the sum of magnitudes; "
                        "the cpu adds in float64 and rounds once", ulps=1, gamma=1),
    "cumsum:int32": Tolerance("int32 sums, wrapping, in any order (associative): exact",
                              exact=True),
    "cumprod": Tolerance("each output a float32 product of up to n factors (the device "
                         "multiplies in chunks, then the chunks' products): within gamma(n) "
                         "of the exact product's magnitude; the cpu multiplies in float64 "
                         "and rounds once", ulps=1, gamma=1),
    "cumprod:int32": Tolerance("int32 products, wrapping, in any order (associative): "
                               "exact", exact=True),
    "reduce_backward:sum": Tolerance(_EXACT_MOVE, exact=True),
    "reduce_backward:mean": Tolerance(_DIV, ulps=3),
    "reduce_backward:max": Tolerance("g / ties: exact for one tie, a 2.5 ULP division for "
                                     "several", ulps=3),
    "reduce_backward:min": Tolerance("g / ties: exact for one tie, a 2.5 ULP division for "
                                     "several", ulps=3),
    "matmul": Tolerance("both backends accumulate in float32 (cpu: BLAS sgemm), each within "
                        "gamma(K) S of the exact product, S = product_scale (|A| @ |B| and a "
                        "small floor term). The gpu's tensor-core kernel (matmul_f16x3.comp, "
                        "K >= 256) is too: two float16 pieces of each operand, scaled by a "
                        "power of two per row of op(A) and column of op(B); its dropped "
                        "piece products are below 12u |a b| plus 2^-38 (max_k|a| |b| + |a| "
                        "max_k|b|), which S's floor term carries; each 16-deep step's three "
                        "tensor-core sums err by at most 3c u of the step's S (c = 36 allows "
                        "no guard bits in their alignment), and the K/16 steps are added with "
                        "float32 rounding: (3c + 12 + K/16) u S <= gamma(K) S once K >= 128",
                        gamma=2),
    "matmul:autocast": Tolerance("operands rounded to bfloat16 or float16 alike on both "
                                 "backends (convert16), so both multiply the same values; "
                                 "the cpu adds the products in float32 (within gamma(K) S). "
                                 "A device with bfloat16 tensor cores adds each 16-deep "
                                 "step's products to the running sum C on them: the 17 "
                                 "addends aligned without guard bits err by at most c u "
                                 "(|C| + S_step), c = 36 as for matmul, so by (2.25 K + 36) "
                                 "u S over K/16 steps, within 2.4 gamma(K) S as the tensor "
                                 "cores take K >= 256 only: 3.4 gamma(K) S between them",
                                 gamma=3.4),
    "conv2d": Tolerance("a product over each output's K terms (conv2d: the C kh kw window "
                        "elements; conv2d_weight: the B oh ow images and windows; "
                        "conv2d_input: each pixel's O kh kw terms, which the cpu sums as a "
                        "product over O, then its windows' in (i, j) order, and the gpu, with "
                        "stride 1, as conv2d of the flipped weight): the cpu "
                        "adds them in float32 by BLAS over unfolded windows (a band of images "
                        "at a time), the gpu by the fma kernel reading the windows in place "
                        "(split K's slices added in float32) or, conv2d on tensor cores, "
                        "three exact bfloat16 pieces (matmul_bf16x6.comp: dropped products "
                        "below 16u S, six tensor-core sums a 16-deep step, (6c + 16 + K/16) "
                        "u S <= gamma(K) S from K >= 248); each within "
                        "gamma(K) S of the exact sum, S = |W| @ |windows|. Under autocast "
                        "on the fma kernel both multiply the operands rounded alike, so the "
                        "bound holds (on tensor cores: conv2d:autocast)", gamma=2),
    "conv2d:autocast": Tolerance("conv2d of operands rounded to bfloat16 alike on both "
                                 "backends; on tensor cores the running sum goes through "
                                 "them as matmul:autocast's, whose bound this is",
                                 gamma=3.4),
    "matmul:bias": Tolerance("the product's bound, then the bias added with one rounding on "
                             "each backend (1 ULP between them); S = |A| @ |B| + |bias| also "
                             "covers the product's error carried through the addition",
                             ulps=1, gamma=2),
    "matmul:relu": Tolerance("matmul:bias's bound: relu then selects x or 0 on each backend, "
                             "which moves no result further from its twin "
                             "(|relu(x) - relu(y)| <= |x - y|)", ulps=1, gamma=2),
    "matmul:bias:autocast": Tolerance("matmul:autocast's bound, then the bias added with one "
                                      "rounding on each backend (1 ULP between them) and the "
                                      "relu where asked (which moves no result further from "
                                      "its twin); S = |A| @ |B| + |bias|", ulps=1, gamma=3.4),
    "matmul:mask": Tolerance("matmul:bias's bound (without a bias, matmul's is within it): "
                             "each backend then keeps x or makes it 0 by the same mask value, "
                             "which moves no result further from its twin", ulps=1, gamma=2),
    "permute": Tolerance(_EXACT_MOVE, exact=True),
    "strided": Tolerance(_EXACT_MOVE, exact=True),
    "strided_backward": Tolerance(_EXACT_MOVE, exact=True),
    "copy": Tolerance(_EXACT_MOVE, exact=True),
    "fill": Tolerance("every element set to the same float32 value", exact=True),
    # -- softmax family ---------------------------------------------------------------------
    "softmax": Tolerance("exp's 3 + 2|x - max| ULP per term, a sum of n terms (gamma(n)) "
                         "and a 2.5 ULP division; bounded relative to each result",
                         ulps=8, ulps_per_x=2, gamma=1, atol=1e-30),
    "log_softmax": Tolerance("(x - max) - log(sum): log's 3 ULP or 2^-21 absolute on "
                             "log(sum) and the sum's gamma(n), absolute in the result's "
                             "magnitude",
                             ulps=4, atol=2.0 ** -20, gamma=1),
    "softmax_backward": Tolerance("y (g - sum(g y)): a length-n sum and cancellation inside "
                                  "the parentheses (bound scales with |y| * sum|g y|)",
                                  ulps=4, gamma=2),
    "log_softmax_backward": Tolerance("g - exp(y) sum(g), which cancels: a length-n sum "
                                      "(gamma(n) of S = exp(y) sum|g| (1 + |y|) + |g|) and "
                                      "exp's 3 + 2|y| ULP on exp(y) sum(g) (within 4u S), "
                                      "then two roundings", ulps=6, gamma=2, rel=4 * U32,
                                      atol=4 * U32),
    "softmax_cross_entropy": Tolerance("per row (max - target logit) + log(sum) "
                                       "(softmax's bounds on the sum), then a mean over "
                                       "rows", ulps=8,
                                       gamma=2, atol=2.0 ** -20),
    "softmax_cross_entropy_backward": Tolerance("(exp((x - max) - log(sum)) - onehot) g "
                                                "/ rows: exp's 3 + 2|x - lse| ULP and two "
                                                "roundings; absolute in g / rows", ulps=8,
                                                ulps_per_x=2,
                                                atol=4 * U32),
    # -- layers ---------------------------------------------------------------------------
    "layer_norm": Tolerance("mean and variance are length-n float32 sums (gamma(n)), "
                            "1/sqrt(var + eps) is within ~5 ULP; the result is an affine map "
                            "of them", ulps=8, gamma=4, atol=8 * U32),
    "layer_norm_backward": Tolerance("two length-n row sums and cancellation in "
                                     "g gamma - a - xhat b; dgamma and dbeta are float32 "
                                     "column sums vs float64 ones", ulps=8, gamma=4,
                                     atol=16 * U32),
    "embedding": Tolerance("a gather: rows copied, no arithmetic", exact=True),
    "embedding_backward": Tolerance("each row sums its positions in the same order; float32 "
                                    "vs float64 accumulation", ulps=1, gamma=1),
    "gather": Tolerance("elements copied, no arithmetic", exact=True),
    "gather_backward": Tolerance("each element sums its gathered positions in float32, in "
                                 "the same order on both backends", exact=True),
    "unfold": Tolerance("window elements copied (or the padding value), no arithmetic",
                        exact=True),
    "fold": Tolerance("each pixel sums the column elements that read it in float32, in the "
                      "same order on both backends", exact=True),
    "max_pool": Tolerance("an index chosen by comparisons: no arithmetic", exact=True),
    "attention": Tolerance("each weight exp(s - m) errs by about (D A + 2|x| + 3) ULP (the "
                           "dot of D terms of magnitude A, Vulkan's exp at x = s - m), the "
                           "sums of S weighted rows by gamma(S); the cpu forms the same in "
                           "float32 BLAS: the scale is sum_j p |v| (1 + A + |x|), n = D + S + "
                           "8, twice for the two sides' errors; 2^-100 for terms under "
                           "float32's normal range, which a device may flush (each below "
                           "1.2e-38 times the magnitudes it meets, a few hundred of them)",
                           gamma=4, ulps=4, atol=2.0 ** -100),
    "attention_backward": Tolerance("the weights recomputed as in the forward, dp and delta "
                                    "dots of D terms, ds = p (dp - delta) summed over S (or "
                                    "L) rows, in any order (the gpu may add dq's shares of "
                                    "32 keys atomically): the scale carries each term's "
                                    "magnitudes; "
                                    "2^-100 for flushed terms, as the forward's",
                                    gamma=4, ulps=4, atol=2.0 ** -100),
    "dropout": Tolerance("the same Philox mask, then x * scale, one correctly rounded "
                         "product", exact=True),
    # -- optimizers -------------------------------------------------------------------------
    # Every update is compared from the same state: each of its float32 operations errs
    # relative to its operands, not its result (w - step cancels), so the bound is gamma(n)
    # over the magnitudes S (differential.py's _optim_scales), with n the roundings of the
    # longest chain (a division counting 2.5, a square root 5): S = |w| + 2|step| + the step
    # formed from magnitudes, for the weight; a moment's sum of magnitudes for each state.
    "optim_step:adam": Tolerance(_OPTIM + "n = 12 (decay, L2, two moments, the running "
                                 "maximum, sqrt, the division, the step)", ulps=1, gamma=1),
    "optim_step:sgd": Tolerance(_OPTIM + "n = 6 roundings (decay, momentum, nesterov, step), "
                                "scale = |w| + |lr d| for the weight, |momentum buf| + |d| "
                                "for the buffer", ulps=1, gamma=1),
    "optim_step:rmsprop": Tolerance(_OPTIM + "n = 16: the centered variance sq - mean^2 "
                                    "cancels, by at most a factor 2 where sq is at least "
                                    "4 mean^2 (as a running mean square is), and sqrt halves "
                                    "that relative error", ulps=1, gamma=1),
    "optim_step:adagrad": Tolerance(_OPTIM + "n = 10 (L2, the sum, sqrt, eps, the division, "
                                    "the step)", ulps=1, gamma=1),
    "optim_step:adamax": Tolerance(_OPTIM + "n = 10; the maximum selects one of two values of "
                                   "two roundings each", ulps=1, gamma=1),
    "optim_step:nadam": Tolerance(_OPTIM + "n = 14: Adam's chain and a second term (the "
                                  "gradient's) in the numerator", ulps=1, gamma=1),
    "optim_step:radam": Tolerance(_OPTIM + "n = 14: Adam's chain; without the adaptive term "
                                  "(the first steps) fewer", ulps=1, gamma=1),
}


# Ops on float16 and bfloat16 tensors compute in float32 and round the result
# (api/low_precision.py): "<entry>@bfloat16" bounds such a result by the float32 entry's bound
# plus one unit of the 16-bit type at the larger of the two results (each rounding moves a
# value by at most half a unit at its rounded value, so r(a) and r(b) are within
# |a - b| + that unit); an exact entry stays exact, as the same float32 value rounds the
# same way on both (convert16).
LOW_TYPES = {"bfloat16": np.dtype(ml_dtypes.bfloat16), "float16": np.dtype(np.float16)}
_ROUNDED_FAMILIES = ("unary", "unary_backward", "binary", "binary_backward", "reduce",
                     "reduce_backward")
_ROUNDED_ENTRIES = ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward",
                    "matmul", "matmul:autocast", "matmul:bias:autocast",
                    "layer_norm", "layer_norm_backward", "embedding", "embedding_backward",
                    "gather", "gather_backward", "cumsum", "conv2d", "max_pool", "attention",
                    "attention_backward", "unfold", "fold")


def _rounded_entry(tol: Tolerance, low: str) -> Tolerance:
    if tol.exact:
        return dataclasses.replace(tol, reason=tol.reason + f"; rounded alike to {low}")
    return dataclasses.replace(tol, rounded_to=low, reason=(
        f"{tol.reason}; then rounded to {low} on both: each rounding moves a result by "
        "at most half a unit of it, at the larger of the two one unit in all"))


TOLERANCES.update({f"{key}@{low}": _rounded_entry(tol, low)
                   for key, tol in list(TOLERANCES.items())
                   if key in _ROUNDED_ENTRIES or key.split(":")[0] in _ROUNDED_FAMILIES
                   for low in LOW_TYPES})


_BELOW_MAX = np.nextafter(np.finfo(np.float32).max, np.float32(0))


def ulp_of_type(x: np.ndarray, low: str) -> np.ndarray:
    """The spacing of 16-bit type ``low`` at |x| (as ``ulp_of``: its subnormal spacing at 0,
    the spacing below its largest finite value past it)."""
    info = ml_dtypes.finfo(LOW_TYPES[low])
    x = np.abs(np.asarray(x, dtype=np.float64))
    x = np.where(np.isfinite(x), np.minimum(x, float(info.max)), 0.0)
    exponent = np.floor(np.log2(np.maximum(x, float(info.smallest_normal))))
    # (at the largest finite value the spacing below it, which its own exponent gives)
    return np.exp2(exponent - info.nmant)


def ulp_of(x: np.ndarray) -> np.ndarray:
    """The float32 spacing at |x| (the smallest subnormal spacing at 0; FLT_MAX's is the
    spacing below it, not the step to inf)."""
    x = np.abs(np.asarray(x, dtype=np.float32))
    x = np.where(np.isfinite(x), np.minimum(x, _BELOW_MAX), np.float32(0))
    return np.spacing(x).astype(np.float64)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """How many float32 values lie between a and b (0 when equal, NaN-aware: two NaNs are
    0 apart, a NaN and a number infinitely far)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)

    def ordered(x):
        i = x.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    d = np.abs(ordered(a) - ordered(b)).astype(np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    d = np.where(nan_a & nan_b, 0.0, d)
    return np.where(nan_a ^ nan_b, np.inf, d)


@dataclasses.dataclass
class Agreement:
    """The result of comparing a gpu result with the cpu reference under one entry."""
    key: str
    ok: bool
    max_abs: float
    max_ulp: float
    worst: float          # max over elements of error / allowed (<= 1 passes)
    count: int
    max_rel: float = 0.0  # max |diff| / |ref| over elements with a finite nonzero ref

    def __str__(self) -> str:
        state = "ok" if self.ok else "DISAGREE"
        return (f"{self.key}: {state} over {self.count} elements; max |diff| "
                f"{self.max_abs:.3g} ({self.max_rel:.3g} relative), max {self.max_ulp:.0f} "
                f"ULP, worst {self.worst:.3g} of the bound")


def _integer_agreement(key: str, got: np.ndarray, ref: np.ndarray) -> Agreement:
    """Integer (and boolean) results: every kernel that makes them is exact."""
    if got.shape != ref.shape:
        return Agreement(key, False, math.inf, math.inf, math.inf, ref.size)
    diff = np.abs(got - ref).astype(np.float64)
    worst = float(diff.max(initial=0.0))
    return Agreement(key, worst == 0.0, worst, worst, math.inf if worst else 0.0, ref.size)


def agreement(key: str, got, ref, x=None, scale=None, length=None,
              flushes_subnormals: bool = False) -> Agreement:
    """Compare ``got`` (gpu) with ``ref`` (cpu) under ``TOLERANCES[key]``. ``x`` is the input
    for x-dependent bounds; ``scale`` (the summed magnitudes) and ``length`` (terms summed)
    feed the gamma term; ``flushes_subnormals`` says the device may flush subnormals."""
    with np.errstate(all="ignore"):          # inf and NaN inputs are compared, not errors
        return _agreement(key, got, ref, x, scale, length, flushes_subnormals)


def _agreement(key, got, ref, x, scale, length, flushes_subnormals) -> Agreement:
    tol = TOLERANCES[key]
    if np.asarray(got).dtype.kind in "biu" and np.asarray(ref).dtype.kind in "biu":
        return _integer_agreement(key, np.asarray(got, np.int64), np.asarray(ref, np.int64))
    got = np.asarray(got, dtype=np.float32)
    ref = np.asarray(ref, dtype=np.float32)
    if got.shape != ref.shape:
        return Agreement(key, False, math.inf, math.inf, math.inf, ref.size)
    ulps = ulp_distance(got, ref)
    with np.errstate(invalid="ignore"):        # inf - inf: handled just below
        diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    both_nan = np.isnan(got) & np.isnan(ref)
    same_inf = np.isinf(ref) & (got == ref)
    diff = np.where(both_nan | same_inf, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    # A device that flushes subnormals may return 0 for a subnormal result: excused.
    excused = np.zeros(ref.shape, bool)
    tiny = np.finfo(np.float32).tiny
    if flushes_subnormals:
        excused = (ref != 0) & (np.abs(ref) < tiny) & (got == 0)
    if tol.exact:        # bit for bit: a zero's sign counts, a NaN's payload does not
        bad = (got.view(np.uint32) != ref.view(np.uint32)) & ~both_nan & ~excused
        # the bound is 0 ULP: "worst" is the largest ULP distance of a wrong element
        worst = float(ulps[bad].max()) if bad.any() else 0.0
    else:
        # At the overflow threshold a result within the bound may round to inf on one side
        # and stay finite on the other: such a pair is measured from the threshold (FLT_MAX
        # and half an ULP, where rounding to inf begins), in ULPs of FLT_MAX.
        low = tol.rounded_to
        big = np.float64(ml_dtypes.finfo(LOW_TYPES[low]).max if low else
                         np.finfo(np.float32).max)
        step = ulp_of_type(big, low) if low else ulp_of(np.float32(big))
        edge = (np.isinf(got) != np.isinf(ref)) & ~np.isnan(got) & ~np.isnan(ref) & \
            (np.signbit(got) == np.signbit(ref))
        near = np.minimum(np.abs(got.astype(np.float64)), np.abs(ref.astype(np.float64)))
        diff = np.where(edge, big + 0.5 * step - near, diff)
        ref_b = np.where(edge, np.copysign(big, ref), ref)
        allowed = tol.ulps * ulp_of(ref_b) + tol.atol
        if low:          # (at the larger of the two: see _rounded_entry)
            larger = np.maximum(np.abs(ref_b.astype(np.float64)),
                                np.where(np.isfinite(got), np.abs(got.astype(np.float64)), 0))
            allowed = allowed + ulp_of_type(larger, low)
        if tol.ulps_per_x and x is not None:
            growth = ARGS[tol.arg](np.asarray(x, np.float64))
            allowed = allowed + tol.ulps_per_x * growth * ulp_of(ref_b)
        if scale is not None:
            scale = np.abs(np.asarray(scale, np.float64))
            # Only terms the entry has: 0 * an infinite scale would be NaN, allowing nothing.
            if tol.gamma and length is not None:
                allowed = allowed + tol.gamma * gamma(length) * scale
                # Terms whose magnitudes sum past float32's range: a partial sum or an
                # unrounded product may overflow in one order and not in another (inf
                # against NaN or a finite sum), so no result is wrong (docs/numerics.md).
                excused |= np.broadcast_to(scale > big, excused.shape)
            if tol.rel:
                allowed = allowed + tol.rel * scale
        allowed = np.nan_to_num(allowed, nan=0.0)       # a NaN bound allows nothing
        if flushes_subnormals:
            # a result whose bound reaches below FLT_MIN may be computed as a subnormal
            # and then flushed: its 0 is excused as a subnormal reference's is
            excused |= (got == 0) & (ref != 0) & (np.abs(ref.astype(np.float64)) - allowed
                                                   < tiny)
        ratio = np.where((diff == 0) | excused, 0.0, diff / np.maximum(allowed, 1e-300))
        bad = ~(ratio <= 1.0)
        worst = float(ratio.max()) if ratio.size else 0.0
    finite = diff[np.isfinite(diff)]
    finite_ulps = ulps[np.isfinite(ulps)]
    nonzero = np.isfinite(ref) & (ref != 0) & np.isfinite(diff)
    rel = diff[nonzero] / np.abs(ref[nonzero].astype(np.float64))
    return Agreement(key, not bool(bad.any()),
                     float(finite.max()) if finite.size else (math.inf if diff.size else 0.0),
                     float(finite_ulps.max()) if finite_ulps.size else
                     (math.inf if ulps.size else 0.0),
                     worst, int(ref.size), float(rel.max()) if rel.size else 0.0)


def assert_agree(key: str, got, ref, **context) -> Agreement:
    """``agreement`` that raises AssertionError (naming the worst element) on failure."""
    result = agreement(key, got, ref, **context)
    if not result.ok:
        g = np.asarray(got, np.float32).reshape(-1)
        r = np.asarray(ref, np.float32).reshape(-1)
        i = int(np.argmax(ulp_distance(g, r)))
        raise AssertionError(f"{result}\n  e.g. element {i}: gpu {g[i]!r}, cpu {r[i]!r}")
    return result
