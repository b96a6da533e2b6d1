"""exp, expm1 and tanh in float64 that the compiler can vectorise.

libm's functions are a call per element, which keeps a loop scalar: the kernels were 2 to 5
times slower than NumPy's float32 SIMD functions. These use only arithmetic, comparisons and
bit casts, so a loop over them runs four elements per instruction.

Method (Cody and Waite): x = k ln 2 + r with k an integer and |r| <= ln(2)/2, where
k * LN2_HI is exact (LN2_HI has 32 significant bits and |k| <= 1075 < 2**11); expm1(r) by
its Taylor series to r**13 / 13!, whose first omitted term is below 5e-18 of the result;
then exp(x) = 2**k (1 + expm1(r)). In float64 the results are within 1 (exp), 2 (expm1) and
3 (tanh) ULP of libm's; rounded to float32 they are libm's, bit for bit
(tests/test_vmath.py), so the cpu reference did not move when these replaced libm's calls.
The kernels that use them let multiply-adds fuse (``kernel(fn, fma=True)``): on a CPU with
FMA the polynomial takes half the instructions, and float64 results may differ from a CPU
without it in the last bit, within the ULPs above; float32 results do not differ.
"""
from __future__ import annotations

from numba import types
from numba.extending import intrinsic

from .jit import scalar

LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238          # ln 2 rounded to 32 significant bits
LN2_LO = 1.9082149292705877e-10      # ln 2 - LN2_HI
ROUND = 6755399441055744.0           # 1.5 * 2**52: t + ROUND - ROUND rounds t to an integer
LIMIT = 745.0                        # exp(-745) is below float64's smallest subnormal
TINY = 2.0 ** -28                    # below this, tanh(x) = x to float64 precision

# 1/n! for n = 13 down to 2, for Horner's scheme.
_C13, _C12, _C11, _C10 = 1 / 6227020800, 1 / 479001600, 1 / 39916800, 1 / 3628800
_C9, _C8, _C7, _C6 = 1 / 362880, 1 / 40320, 1 / 5040, 1 / 720
_C5, _C4, _C3, _C2 = 1 / 120, 1 / 24, 1 / 6, 1 / 2


def _bitcast(source, target):
    """An intrinsic giving the ``target``-typed value whose bits are a ``source`` value."""
    @intrinsic
    def cast(typingctx, value):
        if value != source:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))
        return target(source), codegen
    return cast


_as_float64 = _bitcast(types.int64, types.float64)
_as_int64 = _bitcast(types.float64, types.int64)
_ROUND_BITS = 0x4338000000000000     # the bits of ROUND


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
    p = ((((((((((_C13 * r + _C12) * r + _C11) * r + _C10) * r + _C9) * r + _C8) * r + _C7)
              * r + _C6) * r + _C5) * r + _C4) * r + _C3) * r + _C2
    # k read from t's low bits (a float-to-int64 conversion would not vectorise on AVX2);
    # 2**k in two halves, so that k down to -1075 stays within float64's normal exponents
    k = _as_int64(t) - _ROUND_BITS
    half = k >> 1
    return (kf, _as_float64((half + 1023) << 52), _as_float64((k - half + 1023) << 52),
            r + r * r * p)


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
