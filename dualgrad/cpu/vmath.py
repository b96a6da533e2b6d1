"""exp, expm1, tanh, log, log2, log1p, atan, atan2, asin, acos, exp2, log10, sinh, cosh,
asinh, acosh, atanh, sin, cos, tan, erf and erfc in float64 that the compiler can
vectorise.

libm's functions are a call per element, which keeps a loop scalar: the kernels were 2 to 5
times slower than NumPy's float32 SIMD functions. These use only arithmetic, comparisons and
bit casts, so a loop over them runs four elements per instruction.

Method (Cody and Waite): x = k ln 2 + r with k an integer and |r| <= ln(2)/2, where
k * LN2_HI is exact (LN2_HI has 32 significant bits and |k| <= 1075 < 2**11); expm1(r) by
its Taylor series to r**13 / 13!, economized to degree 11 with Chebyshev polynomials on
|r| <= ln(2)/2 (the two dropped terms and the series' tail change the result by below 2e-17);
then exp(x) = 2**k (1 + expm1(r)). In float64 the results are within 1 (exp), 2 (expm1) and
3 (tanh) ULP of libm's; rounded to float32 they are libm's, bit for bit
(tests/test_vmath.py), so the cpu reference did not move when these replaced libm's calls.
The kernels that use them let multiply-adds fuse (``jit.fma_kernel``): on a CPU with
FMA the polynomial takes half the instructions, and float64 results may differ from a CPU
without it in the last bit, within the ULPs above; float32 results do not differ.

A float32 tanh takes ``vtanh_f32``: for |x| past 9.011 float32 tanh is +-1, so 2|x| can be
capped at 20, which keeps k within [-29, 0] and drops the clamps, the split 2**k and the
branches of the general path; its float32 results are vtanh's, bit for bit. Float32 exp and
exp2 (and sigmoid and silu, made of exp) take ``vexp_f32`` and ``vexp2_f32`` alike: clamped
where float32's result is 0 or inf already, 2**k is one factor, with no branch for overflow.

log (Cody and Waite's reduction again): x = 2**e m with m in [sqrt(1/2), sqrt(2)), read from
x's bits; log(m) = 2 atanh(s) with s = (m - 1)/(m + 1), |s| <= 0.1716, by its odd series
to s**23 (the tail is below 2e-18 of the result); log x = e ln2 + log m with e ln2 split in
LN2_HI (exact for |e| <= 1075) and LN2_LO. m - 1 is exact, so log m is within about 1.5 ULP;
log2 takes e + log(m) log2(e), exact at powers of two. log1p(x) is log(u) x / (u - 1) with
u = 1 + x (Goldberg's form: the rounding of u cancels out), x itself where u rounds to 1.

Numba's disk cache keys a kernel on its own file, not on the helpers it inlines; the cache
directory is named by a hash of this package's sources (``jit.sources_tag``), so an edit here
gets kernels compiled anew.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from numba import types
from numba.extending import intrinsic

from .jit import scalar

LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238          # ln 2 rounded to 32 significant bits
LN2_LO = 1.9082149292705877e-10      # ln 2 - LN2_HI
ROUND = 6755399441055744.0           # 1.5 * 2**52: t + ROUND - ROUND rounds t to an integer
LIMIT = 745.0                        # exp(-745) is below float64's smallest subnormal
TINY = 2.0 ** -28                    # below this, tanh(x) = x to float64 precision
Z_CAP = 20.0                         # 2|x| past which float32 tanh is +-1 (from |x| = 9.011)

# expm1(r) = r + r**2 * P(r): P's coefficients, r**0 to r**9. The Taylor coefficients 1/n!
# (n = 2 to 13) with the r**10 and r**11 terms folded into the lower ones through T11 and
# T10 (exact rational arithmetic, then rounded once).
_P0, _P1, _P2, _P3, _P4 = (0.5000000000000001, 0.1666666666666667, 0.04166666666662423,
                           0.008333333333326151, 0.0013888888917152383)
_P5, _P6, _P7, _P8, _P9 = (0.00019841269874751213, 2.4801521415614273e-05,
                           2.7557255510077908e-06, 2.7620008604445525e-07,
                           2.510515324583064e-08)


def bitcast(source, target):
    """An intrinsic giving the ``target``-typed value whose bits are a ``source`` value."""
    @intrinsic
    def cast(typingctx, value):
        if value != source:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))
        return target(source), codegen
    return cast


_as_float64 = bitcast(types.int64, types.float64)
_as_int64 = bitcast(types.float64, types.int64)
_ROUND_BITS = 0x4338000000000000     # the bits of ROUND


@scalar
def _power_of_two(t):
    """2**k for t = k + ROUND (k an integer, -1023 to 1023), read from t's low bits: a
    normal float64, or 0 for k = -1023 (its exponent field 0)."""
    return _as_float64((_as_int64(t) + (1023 - _ROUND_BITS)) << 52)


@scalar
def _expm1_reduced(r):
    """expm1(r) for |r| <= ln(2)/2: r + r**2 P(r), P by Horner's rule."""
    p = ((((((((_P9 * r + _P8) * r + _P7) * r + _P6) * r + _P5) * r + _P4) * r + _P3) * r
          + _P2) * r + _P1) * r + _P0
    return r + r * r * p


@scalar
def _split(x):
    """(k, 2**j, 2**(k - j), expm1(r)) with x = k ln 2 + r and j = floor(k / 2): two
    factors, each within float64's normal exponents for any k from -1075 to 1075. A NaN x
    gives a NaN last part."""
    x = -LIMIT if x < -LIMIT else (LIMIT if x > LIMIT else x)   # NaN passes through
    t = x * LOG2E + ROUND
    t = ROUND if t != t else t
    kf = t - ROUND
    r = (x - kf * LN2_HI) - kf * LN2_LO
    # k read from t's low bits (a float-to-int64 conversion would not vectorise on AVX2);
    # 2**k in two halves, so that k down to -1075 stays within float64's normal exponents
    k = _as_int64(t) - _ROUND_BITS
    half = k >> 1
    return (kf, _as_float64((half + 1023) << 52), _as_float64((k - half + 1023) << 52),
            _expm1_reduced(r))


@scalar
def vexp(x):
    """exp(x), float64 in and out."""
    _, s1, s2, em = _split(x)
    return s1 * (s2 + s2 * em)             # 2**k would overflow before the product does


@scalar
def vexpm1(x):
    """exp(x) - 1, accurate near 0 too (where k = 0 and the series is the result)."""
    kf, s1, s2, em = _split(x)
    scale = s1 * s2
    # scale - 1 is exact for |k| <= 53, where it matters: one rounding in the sum
    y = scale * em + (scale - 1.0) if kf < 1000.0 else s1 * (s2 + s2 * em)
    y = em if kf == 0.0 else y
    return x if x == 0.0 else y            # keeps the sign of a zero


@scalar
def vtanh(x):
    """tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|)), with the sign of x."""
    em = vexpm1(-2.0 * abs(x))
    t = -em / (2.0 + em)
    t = t if x >= 0.0 else -t
    return x if abs(x) < TINY else t          # keeps signed zeros, tiny values and NaN


@scalar
def _expm1_neg(z):
    """expm1(-z) for 0 <= z <= Z_CAP (NaN passes through): _split and vexpm1's steps where
    k lies in [-29, 0], so 2**k is one normal factor and no clamp or overflow branch is
    needed."""
    t = z * -LOG2E + ROUND
    kf = t - ROUND
    r = (kf * -LN2_HI - z) - kf * LN2_LO
    scale = _power_of_two(t)
    # scale - 1 is exact; for k = 0 this is expm1(r) itself, so small z keeps its digits
    return scale * _expm1_reduced(r) + (scale - 1.0)


@scalar
def vtanh_f32(x):
    """tanh(x) for a float32 x held as a float64, to be rounded to float32: the same formula
    as vtanh on |x| capped where float32 tanh is already +-1, at about two thirds of its
    cost. Rounded to float32, its results are vtanh's for every float32 x, NaNs and signed
    zeros included (tests/test_vmath.py)."""
    z = 2.0 * abs(x)
    z = Z_CAP if z > Z_CAP else z            # NaN passes through
    em = _expm1_neg(z)
    t = -em / (2.0 + em)
    t = t if x >= 0.0 else -t
    return x if abs(x) < TINY else t          # keeps signed zeros and tiny values


# Float32 inputs, results rounded to float32: past these clamps exp(x) rounds to 0 (below
# e**-103.98) or inf (above e**88.73) in float32 as the unclamped value does, and within them
# 2**k is one float64 factor, so no second scale and no overflow branch is needed. At the
# low clamp k is -1023, whose factor's bits are all 0: exp is exactly 0 there, as a
# product x exp(y) at x = -inf needs to be NaN.
F32_EXP_LOW, F32_EXP_HIGH = -709.0, 89.0


@scalar
def _exp_f32_range(c):
    """exp(c) for c in [F32_EXP_LOW, F32_EXP_HIGH] (NaN gives NaN): vexp's steps with 2**k
    one factor (normal, or 0 where k is -1023)."""
    t = c * LOG2E + ROUND
    kf = t - ROUND
    r = (c - kf * LN2_HI) - kf * LN2_LO
    scale = _power_of_two(t)
    return scale + scale * _expm1_reduced(r)


@scalar
def vexp_f32(x):
    """exp(x) for a float32 x held as a float64, to be rounded to float32: x clamped to
    [F32_EXP_LOW, F32_EXP_HIGH]. Rounded to float32, its results are vexp's for every float32
    x (tests/test_vmath.py); a NaN gives a NaN, whose sign may differ from vexp's."""
    return _exp_f32_range(F32_EXP_LOW if x < F32_EXP_LOW else
                          (F32_EXP_HIGH if x > F32_EXP_HIGH else x))


@scalar
def vexp_neg_f32(z):
    """exp(-z) for z >= 0 (or NaN), as vexp_f32(-z) with one clamp."""
    return _exp_f32_range(-(-F32_EXP_LOW if z > -F32_EXP_LOW else z))


_MANTISSA = (1 << 52) - 1
_ONE_BITS = 0x3FF0000000000000
_SQRT2_BITS = 0x3FF6A09E667F3BCD      # the bits of sqrt(2)
_TWO_54 = 18014398509481984.0         # 2**54: lifts a subnormal to a normal
# 2 atanh(s) = 2s + 2s * z * Q(z), z = s**2: Q's coefficients 1/3, 1/5, ..., 1/23
_Q = tuple(1.0 / (2 * k + 1) for k in range(1, 12))
_Q0, _Q1, _Q2, _Q3, _Q4, _Q5, _Q6, _Q7, _Q8, _Q9, _Q10 = _Q
LOG2E_HI = 1.4426950408889634


@scalar
def _log_parts(x):
    """(e as a float, log(m)) with x = 2**e m, m in [sqrt(1/2), sqrt(2)), for a positive
    finite x (others give garbage, which the callers replace)."""
    sub = x < 2.2250738585072014e-308
    x = x * _TWO_54 if sub else x
    b = _as_int64(x)
    e = (b >> 52) - (1023 + 54 if sub else 1023)
    mb = (b & _MANTISSA) | _ONE_BITS             # m in [1, 2)
    big = mb > _SQRT2_BITS
    mb = mb - (1 << 52) if big else mb           # m / 2
    e = e + 1 if big else e
    m = _as_float64(mb)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    q = (((((((((_Q10 * z + _Q9) * z + _Q8) * z + _Q7) * z + _Q6) * z + _Q5) * z + _Q4) * z
            + _Q3) * z + _Q2) * z + _Q1) * z + _Q0
    # e as a float from its bits (an int64-to-float conversion would not vectorise on AVX2)
    ef = _as_float64(e + _ROUND_BITS) - ROUND
    return ef, 2.0 * s + 2.0 * s * (z * q)


@scalar
def _log_specials(x, y):
    """y where x > 0 is finite; log's values at 0 (-inf), below 0 (NaN), inf and NaN."""
    y = -math.inf if x == 0.0 else y
    y = math.nan if x < 0.0 else y
    return x if (x == math.inf or x != x) else y


@scalar
def vlog(x):
    """log(x), float64 in and out."""
    ef, lm = _log_parts(x)
    return _log_specials(x, ef * LN2_HI + (ef * LN2_LO + lm))


@scalar
def vlog2(x):
    """log2(x): e + log(m) log2(e), exact at powers of two."""
    ef, lm = _log_parts(x)
    return _log_specials(x, ef + lm * LOG2E_HI)


@scalar
def vlog1p(x):
    """log(1 + x), accurate near 0: log(u) x / (u - 1) with u = 1 + x."""
    u = 1.0 + x
    d = u - 1.0
    y = vlog(u) * (x / d)
    y = x if d == 0.0 else y                     # (keeps -0 and tiny x)
    return math.inf if x == math.inf else y


# atan (Cephes' atan.c, Moshier): |x| brought into [0, 0.66] by atan(x) = pi/2 - atan(1/x)
# past tan(3 pi/8) and pi/4 + atan((x - 1)/(x + 1)) past 0.66, then x + x z P(z)/Q(z) with
# z = x**2 (a rational fit, within about 1 ULP of float64); the reflections add pi/2 and
# pi/4 as a float64 plus the part it drops (MOREBITS).
_ATAN_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1,
           -7.500855792314704667340e1, -1.228866684490136173410e2,
           -6.485021904942025371773e1)
_ATAN_Q = (2.485846490142306297962e1, 1.650270098316988542046e2,
           4.328810604912902668951e2, 4.853903996359136964868e2,
           1.945506571482613964425e2)
T3P8 = 2.41421356237309504880                # tan(3 pi / 8)
PIO2 = 1.57079632679489661923
PIO4 = 0.78539816339744830962
MOREBITS = 6.123233995736765886130e-17       # pi/2 - PIO2


@scalar
def _atan_reduced(t, base, extra):
    """base + atan(t) for |t| <= tan(pi/8) or so: Cephes' rational function (extra: what
    float64's base drops)."""
    z = t * t
    p = (((_ATAN_P[0] * z + _ATAN_P[1]) * z + _ATAN_P[2]) * z + _ATAN_P[3]) * z + _ATAN_P[4]
    q = ((((z + _ATAN_Q[0]) * z + _ATAN_Q[1]) * z + _ATAN_Q[2]) * z + _ATAN_Q[3]) * z \
        + _ATAN_Q[4]
    return base + ((t * z * (p / q) + extra) + t)


@scalar
def _atan_positive(a):
    """atan(a) for a >= 0 (inf gives pi/2); NaN passes through."""
    big, mid = a > T3P8, a > 0.66
    t = -1.0 / a if big else ((a - 1.0) / (a + 1.0) if mid else a)
    base = PIO2 if big else (PIO4 if mid else 0.0)
    extra = MOREBITS if big else (0.5 * MOREBITS if mid else 0.0)
    return _atan_reduced(t, base, extra)


@scalar
def _atan_ratio(lo, hi):
    """atan(lo / hi) for 0 <= lo <= hi, hi > 0: past 0.66 as pi/4 + atan((lo - hi) /
    (lo + hi)), formed from lo and hi (one division, where lo / hi first took two)."""
    mid = lo > 0.66 * hi
    scale = 0.5 if hi > 1e300 else 1.0           # (lo + hi may pass float64's range there)
    lo, hi = lo * scale, hi * scale
    t = (lo - hi if mid else lo) / (lo + hi if mid else hi)
    return _atan_reduced(t, PIO4 if mid else 0.0, 0.5 * MOREBITS if mid else 0.0)


@scalar
def vatan(x):
    """atan(x), float64 in and out; signed zeros and NaN kept."""
    y = _atan_positive(abs(x))
    return x if x == 0.0 else (-y if x < 0.0 else y)


@scalar
def vatan2(y, x):
    """atan2(y, x) with C's values at zeros and infinities: atan of the smaller magnitude
    over the larger (in [0, 1]), reflected into the quadrant of (x, y). The angle is kept
    as hi + lo until the end (lo: the part of pi/2, pi/4 or pi a float64 drops), so that a
    reflection about pi does not round twice."""
    ax, ay = abs(x), abs(y)
    both_inf = (ax == math.inf) & (ay == math.inf)
    steep = ay > ax
    t = _atan_ratio(min(ax, ay), max(ax, ay))
    vertical = (ax == 0.0) & (ay != 0.0)
    hi = PIO4 if both_inf else (PIO2 if vertical else (PIO2 - t if steep else t))
    lo = 0.5 * MOREBITS if both_inf else (MOREBITS if vertical | steep else 0.0)
    hi = 0.0 if ay == 0.0 else hi
    lo = 0.0 if ay == 0.0 else lo
    negative_x = (x < 0.0) | ((x == 0.0) & (math.copysign(1.0, x) < 0.0))
    a = ((math.pi - hi) + (2.0 * MOREBITS - lo)) if negative_x else hi + lo
    a = a if (x == x) & (y == y) else x + y
    return math.copysign(a, y) if a == a else a


# asin and acos from one series: asin(s) = s + s w P(w), w = s^2, for 0 <= s <= 1/2 (Taylor's
# coefficients (2n)! / (4^n (n!)^2 (2n + 1)), n = 1..22, exact rationals rounded once: the
# terms left out sum to below 5e-17 of the result), and past 1/2 through
# asin(a) = pi/2 - 2 asin(sqrt((1 - a) / 2)), where 1 - a and the halving are exact. One
# square root and no division, where the angle of (sqrt((1 - x)(1 + x)), x) by vatan2
# took two divisions besides.
_ASIN_DOWN = np.array([float(Fraction(math.factorial(2 * n), 4 ** n * math.factorial(n) ** 2
                                      * (2 * n + 1))) for n in range(22, 0, -1)])


@scalar
def _asin_parts(x):
    """(t, far) for |x| <= 1: far = |x| > 1/2; t = asin(|x|) where not far, else
    asin(sqrt((1 - |x|) / 2)). NaN for NaN and outside [-1, 1] (a negative root)."""
    a = abs(x)
    far = a > 0.5
    w = 0.5 * (1.0 - a) if far else a * a
    s = math.sqrt(w) if far else a
    p = 0.0
    for i in range(_ASIN_DOWN.size):
        p = p * w + _ASIN_DOWN[i]
    return s + s * (w * p), far


@scalar
def vasin(x):
    """asin(x), float64 in and out (NaN outside [-1, 1]); signed zeros kept."""
    t, far = _asin_parts(x)
    return math.copysign((PIO2 - 2.0 * t) + MOREBITS if far else t, x)


@scalar
def vacos(x):
    """acos(x), float64 in and out (NaN outside [-1, 1]): pi/2 - asin(x) to |x| = 1/2,
    past it 2 asin(sqrt((1 - |x|) / 2)) reflected about pi/2 for a negative x."""
    t, far = _asin_parts(x)
    near = (PIO2 - math.copysign(t, x)) + MOREBITS
    return (2.0 * t if x > 0.0 else (2.0 * PIO2 - 2.0 * t) + 2.0 * MOREBITS) if far else near


# asinh and acosh by log1p, where nothing cancels: asinh(a) = log1p(a + a^2 / (1 + sqrt(1 +
# a^2))), acosh(1 + t) = log1p(t + sqrt(t (t + 2))) (t = x - 1 exact for a float32 x); past
# 2**28, where a^2 would swamp 1, log(2a) = log(a) + ln 2.
HUGE = 2.0 ** 28


@scalar
def vasinh(x):
    """asinh(x), float64 in and out; signed zeros and NaN kept."""
    a = abs(x)
    near = vlog1p(a + a * a / (1.0 + math.sqrt(1.0 + a * a)))
    y = vlog(a) + LN2_HI + LN2_LO if a > HUGE else near
    return math.copysign(y, x)


@scalar
def vacosh(x):
    """acosh(x), float64 in and out (NaN below 1)."""
    t = x - 1.0
    near = vlog1p(t + math.sqrt(t * (t + 2.0)))
    y = vlog(x) + LN2_HI + LN2_LO if x > HUGE else near
    return math.nan if x < 1.0 else y      # (t (t + 2) is positive below -1 too)


# exp2, log10 and the hyperbolic functions, from the functions above.
LN2 = 0.6931471805599453
INV_LN10 = 0.4342944819032518


@scalar
def vexp2(x):
    """2**x = 2**k exp(f ln 2), x = k + f with k the nearest integer (so an integral x gives
    its power of two exactly); 2**k in two halves, as _split's. |f ln 2| <= ln(2)/2 is
    _expm1_reduced's range already, so exp(f ln 2) needs no second reduction."""
    c = -1100.0 if x < -1100.0 else (1100.0 if x > 1100.0 else x)   # NaN passes through
    t = c + ROUND
    t = ROUND if t != t else t
    kf = t - ROUND
    k = _as_int64(t) - _ROUND_BITS
    half = k >> 1
    s2 = _as_float64((k - half + 1023) << 52)
    return _as_float64((half + 1023) << 52) * (s2 + s2 * _expm1_reduced((c - kf) * LN2))


@scalar
def vexp2_f32(x):
    """2**x for a float32 x held as a float64, to be rounded to float32: vexp2's steps on x
    clamped to [-1000, 129] (2**x rounds to 0 or inf past them in float32), with one scale
    factor; rounded to float32, vexp2's results (NaN: a NaN)."""
    c = -1000.0 if x < -1000.0 else (129.0 if x > 129.0 else x)
    t = c + ROUND
    kf = t - ROUND
    scale = _power_of_two(t)
    return scale + scale * _expm1_reduced((c - kf) * LN2)


@scalar
def vlog10(x):
    return vlog(x) * INV_LN10


@scalar
def vsinh(x):
    """sinh(x) = (e + e / (e + 1)) / 2 with e = expm1(|x|) (no cancellation near 0), with the
    sign of x; signed zeros and NaN kept."""
    e = vexpm1(abs(x))
    s = 0.5 * (e + e / (e + 1.0))
    s = 0.5 * e if e == math.inf else s       # (inf / inf would be NaN)
    return x if x == 0.0 else (-s if x < 0.0 else s)


@scalar
def vcosh(x):
    e = vexp(abs(x))
    return 0.5 * (e + 1.0 / e)


@scalar
def vatanh(x):
    """atanh(x) = log1p(2|x| / (1 - |x|)) / 2 with the sign of x (1 - |x| is exact near 1);
    +-inf at +-1, NaN past."""
    a = abs(x)
    r = 0.5 * vlog1p(2.0 * a / (1.0 - a))
    r = math.nan if a > 1.0 else r
    return x if x == 0.0 else (-r if x < 0.0 else r)


# sin, cos and tan for |x| below TRIG_LIMIT (past it, and for inf and NaN, NaN: the caller
# then takes libm's): x = q pi/2 + r by Cody and Waite's reduction with pi/2 in three parts
# (the first two of 33 significant bits, so q times them is exact for q < 2**20), then the
# Taylor series of sin r and cos r for |r| <= pi/4 to r**17 and r**18 (their tails are below
# 1e-19 of the result: exact coefficients 1/n!, no fitted ones).
PIO2_1 = 1.5707963267341256
PIO2_2 = 6.077100506303966e-11
PIO2_3 = 2.0222662487959506e-21
TWO_OVER_PI = 0.6366197723675814
TRIG_LIMIT = 1.0e6
_SIN_C = tuple((-1.0) ** k / math.factorial(2 * k + 1) for k in range(1, 9))
_COS_C = tuple((-1.0) ** k / math.factorial(2 * k) for k in range(2, 10))


@scalar
def _quarter(x):
    """(r, q) with x = q pi/2 + r, |r| <= pi/4 (about), for |x| < TRIG_LIMIT."""
    t = x * TWO_OVER_PI + ROUND
    kf = t - ROUND
    return ((x - kf * PIO2_1) - kf * PIO2_2) - kf * PIO2_3, _as_int64(t) - _ROUND_BITS


@scalar
def _horner(z, coefficients):
    """sum coefficients[k] z**k (eight of them), by Horner's rule."""
    p = coefficients[7]
    for c in coefficients[6::-1]:
        p = p * z + c
    return p


@scalar
def _sin_series(r):
    z = r * r
    return r + r * z * _horner(z, _SIN_C)


@scalar
def _cos_series(r):
    z = r * r
    return (1.0 - 0.5 * z) + z * z * _horner(z, _COS_C)


@scalar
def _sin_cos(x):
    """(sin x, cos x) for |x| < TRIG_LIMIT, else NaNs."""
    inside = abs(x) < TRIG_LIMIT
    r, q = _quarter(x if inside else 0.0)
    s, c = _sin_series(r), _cos_series(r)
    sin_x = s if (q & 1) == 0 else c
    sin_x = -sin_x if (q & 2) != 0 else sin_x
    cos_x = c if (q & 1) == 0 else s
    cos_x = -cos_x if ((q + 1) & 2) != 0 else cos_x
    return (sin_x if inside else math.nan), (cos_x if inside else math.nan)


@scalar
def vsin(x):
    s, _ = _sin_cos(x)
    return x if x == 0.0 else s            # (keeps the sign of a zero)


@scalar
def vcos(x):
    _, c = _sin_cos(x)
    return c


@scalar
def vtan(x):
    s, c = _sin_cos(x)
    return x if x == 0.0 else s / c


# -- erfc and erf ------------------------------------------------------------------------------
# erfc(z) for z >= 0 is t exp(-z**2 + P(x)), t = 2 / (2 + z), x = (2 - z) / (2 + z) = 2t - 1
# in (-1, 1] for z in [0, inf) (the form of Numerical Recipes' erfccheb): P is smooth on the
# whole range, -log(2 sqrt(pi)) at x = -1. Its Chebyshev coefficients below were fitted at
# 400 Chebyshev nodes to log(erfcx(z) / t) evaluated with mpmath at 40 digits (erfcx(z) =
# exp(z**2) erfc(z): no cancellation), degree 25: |P - fit| < 3e-15 over the range. z**2 is
# split exactly as hi + lo (Dekker), so exp(-hi) exp(P - lo) keeps float64's relative
# accuracy where z**2 is large; the results are within about 4e-15 of erfc, and rounded to
# float32 they are libm's (tests/test_vmath.py).
_ERFC_CHEB = (-0.6513268598908551, 0.64196979235649, 0.019476473204185784,
              -0.00956151478680864, -0.0009465953444820552, 0.0003668394978527215,
              4.252332480708339e-05, -2.0278578112729896e-05, -1.6242900048079375e-06,
              1.3036558353965415e-06, 1.5626441821260566e-08, -8.523809594848685e-08,
              6.5290543820711754e-09, 5.059343083765744e-09, -9.91364194752996e-10,
              -2.273651381835986e-10, 9.646796022518426e-11, 2.3938414671322186e-12,
              -6.8859544960494354e-12, 8.94320739235132e-13, 3.128880251665029e-13,
              -1.1285824593018982e-13, 2.826166425630797e-16, 6.904481587061906e-15,
              -1.727101704552154e-15, -2.2962602208250234e-16)
_SPLIT = 134217729.0                 # 2**27 + 1: Dekker's splitter
ERFC_CAP = 30.0                      # erfc(30) is below float64's smallest subnormal
# erf(x) = (2 / sqrt(pi)) sum (-1)**n x**(2n+1) / (n! (2n+1)): the coefficients to n = 13
# (the next term is below 2e-18 of the result for |x| < 0.5)
_ERF_TAYLOR = tuple((-1.0) ** n * 2.0 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1))
                    for n in range(14))


def _power_coefficients(chebyshev) -> np.ndarray:
    """The coefficients of sum chebyshev[n] T_n(x) in powers of x, each rounded once from
    its exact value (T_n's coefficients are integers: rational arithmetic, no cancellation
    in float64)."""
    t_prev, t = [Fraction(1)], [Fraction(0), Fraction(1)]      # T_0, T_1
    exact = [Fraction(0)] * len(chebyshev)
    for n, c in enumerate(chebyshev):
        tn = t_prev if n == 0 else t
        for k, v in enumerate(tn):
            exact[k] += Fraction(c) * v
        if n >= 1:                                              # T_{n+1} = 2x T_n - T_{n-1}
            nxt = [Fraction(0)] + [2 * v for v in t]
            for k, v in enumerate(t_prev):
                nxt[k] -= v
            t_prev, t = t, nxt
    return np.array([float(v) for v in exact])


# (arrays, which Numba compiles in as constants: a loop over a global tuple rebuilds the
# tuple at every element, ten times slower)
_ERFC_POWERS = _power_coefficients(_ERFC_CHEB)       # |c_k| <= 0.68, summing to 1.46
_ERF_DOWN = np.array(_ERF_TAYLOR[::-1])              # (highest first, as the loop takes it)


@scalar
def _estrin8(c, k, x, x2, x4):
    """sum c[k + i] x**i for i = 0..7, by Estrin's scheme (x2 = x**2, x4 = x**4)."""
    return ((c[k] + c[k + 1] * x) + (c[k + 2] + c[k + 3] * x) * x2
            + ((c[k + 4] + c[k + 5] * x) + (c[k + 6] + c[k + 7] * x) * x2) * x4)


@scalar
def _erfc_series(x):
    """sum _ERFC_POWERS[k] x**k for x in (-1, 1], by Estrin's scheme: five levels of
    multiply-adds where Clenshaw's recurrence over the Chebyshev form was a chain of 50."""
    c = _ERFC_POWERS
    x2 = x * x
    x4 = x2 * x2
    x8 = x4 * x4
    high = _estrin8(c, 16, x, x2, x4) + (c[24] + c[25] * x) * x8
    return (_estrin8(c, 0, x, x2, x4) + _estrin8(c, 8, x, x2, x4) * x8) + high * (x8 * x8)


@scalar
def _erfc_nonnegative(z):
    """erfc(z) for z >= 0 (NaN for NaN)."""
    z = ERFC_CAP if z > ERFC_CAP else z                # (NaN passes through)
    t = 2.0 / (2.0 + z)
    p = _erfc_series(t + t - 1.0)
    a = _SPLIT * z
    zh = a - (a - z)
    zl = z - zh
    hi = z * z
    lo = ((zh * zh - hi) + 2.0 * zh * zl) + zl * zl
    return t * vexp(-hi) * vexp(p - lo)


@scalar
def _erf_series(x):
    """erf(x) by its Taylor series, for |x| < 0.5."""
    z = x * x
    s = 0.0
    for i in range(_ERF_DOWN.size):
        s = s * z + _ERF_DOWN[i]
    return x * s


# Phi, for gelu: erfc's fit above to degree 16 (the terms left out sum to about 1e-10, far
# below a float32 result's 6e-8) and z**2 in one exponent (its rounding costs 1e-13 at the
# cap): half the work of verfc, whose float64 accuracy erfc itself needs. The series is
# taken in powers of u (its coefficients are below 0.7 in size, so nothing cancels) and
# evaluated by Estrin's scheme, four levels of multiply-adds where Clenshaw's recurrence is
# a chain of 32: gelu's kernel 1.3 times as fast, with the same float32 results.
_PHI_POWERS = np.polynomial.chebyshev.cheb2poly(np.array(_ERFC_CHEB[:17]))
_SQRT1_2 = 0.7071067811865476


@scalar
def _phi_series(u):
    """sum of _PHI_POWERS[k] u**k by Estrin's scheme."""
    c = _PHI_POWERS
    u2 = u * u
    u4 = u2 * u2
    u8 = u4 * u4
    return _estrin8(c, 0, u, u2, u4) + (_estrin8(c, 8, u, u2, u4) + c[16] * u8) * u8


@scalar
def vphi(x):
    """The standard normal CDF, Phi(x) = erfc(-x / sqrt 2) / 2, to about 1e-10 relative
    (1 - Phi(|x|) for x < 0: nothing cancels); NaN for NaN."""
    z = abs(x) * _SQRT1_2
    z = ERFC_CAP if z > ERFC_CAP else z
    t = 2.0 / (2.0 + z)
    tail = 0.5 * t * vexp(_phi_series(t + t - 1.0) - z * z)     # erfc(z) / 2
    return tail if x < 0.0 else 1.0 - tail


@scalar
def vphi_f32(x):
    """vphi for a float32 x, to be rounded to float32 once it is multiplied by x (gelu) or
    added to (gelu's gradient): e**-(z**2 - P) by vexp_neg_f32, exactly 0 where z**2 passes
    709 (x below -37.7, where gelu and its gradient round to -0 and 0 in float32 either way,
    and gelu(-inf) stays NaN), so z needs no cap."""
    z = abs(x) * _SQRT1_2
    t = 2.0 / (2.0 + z)
    tail = 0.5 * t * vexp_neg_f32(z * z - _phi_series(t + t - 1.0))     # erfc(z) / 2
    return tail if x < 0.0 else 1.0 - tail


@scalar
def verfc(x):
    """erfc(x), float64 in and out: 1 - erf(x) below |x| = 0.5 (no cancellation there)."""
    e = _erfc_nonnegative(abs(x))
    far = 2.0 - e if x < 0.0 else e
    return 1.0 - _erf_series(x) if abs(x) < 0.5 else far


@scalar
def verf(x):
    """erf(x): the Taylor series below |x| = 0.5, else 1 - erfc(|x|), signed."""
    far = 1.0 - _erfc_nonnegative(abs(x))
    far = -far if x < 0.0 else far
    return _erf_series(x) if abs(x) < 0.5 else far
