"""The cpu backend's vectorisable exp, expm1 and tanh (dualgrad/cpu/vmath.py) give the
float32 results libm gives, rounded once from float64: the reference did not move when they
replaced libm's calls. In float64 they stay within 1 (exp), 2 (expm1) and 3 (tanh) ULP of
libm, the rounding steps each formula adds."""
import math

import numpy as np
import pytest
from numba import njit

from dualgrad.cpu import unary, vmath
from dualgrad.kernel_ops import UNARY
from dualgrad.testing import ulp_distance

SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, -1e-45, 3e38, -3e38,
            88.72283, 88.72284, -87.33654, -103.97208, -103.9721, 0.34657359, -0.34657359,
            9.0, -9.0, 0.5493, -0.5493, 2.0 ** -28, -(2.0 ** -28), 745.2, -745.2]


def _kernel(fn):
    # as the library compiles the kernels that use them: multiply-adds may fuse
    @njit(error_model="numpy", fastmath={"contract"})
    def apply(x, out):
        for i in range(x.size):
            out[i] = fn(np.float64(x[i]))
    return apply


PAIRS = {"exp": (vmath.vexp, math.exp), "expm1": (vmath.vexpm1, math.expm1),
         "tanh": (vmath.vtanh, math.tanh)}
FLOAT64_ULPS = {"exp": 1, "expm1": 2, "tanh": 3}


def inputs(dtype):
    rng = np.random.default_rng(0)
    return np.concatenate([rng.uniform(-110.0, 95.0, 400_000), rng.standard_normal(400_000),
                           rng.standard_normal(100_000) * 1e-5, SPECIALS]).astype(dtype)


def _both(pair, x):
    """(ours, libm's) results over x."""
    ours, libm = (_kernel(f) for f in pair)
    got, want = np.empty_like(x), np.empty_like(x)
    with np.errstate(all="ignore"):
        ours(x, got)
        libm(x, want)
    return got, want


def _assert_bit_for_bit(x, got, want):
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same][:5], got[~same][:5], want[~same][:5])


def _assert_within(x, got, want, ulps):
    with np.errstate(invalid="ignore"):
        close = np.abs(got - want) <= ulps * np.spacing(np.abs(want))
    ok = (np.isnan(got) & np.isnan(want)) | (np.isinf(want) & (got == want)) | close
    assert ok.all(), (x[~ok][:5], got[~ok][:5], want[~ok][:5])


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_float32_results_are_libms_bit_for_bit(name):
    x = inputs(np.float32)
    _assert_bit_for_bit(x, *_both(PAIRS[name], x))


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_float64_results_stay_near_libm(name):
    x = np.concatenate([inputs(np.float64), np.linspace(-745.5, 709.9, 100_001)])
    _assert_within(x, *_both(PAIRS[name], x), FLOAT64_ULPS[name])


LOG_PAIRS = {"log": (vmath.vlog, math.log), "log2": (vmath.vlog2, math.log2),
             "log1p": (vmath.vlog1p, math.log1p)}
LOG_ULPS = {"log": 2, "log2": 3, "log1p": 3}     # log m: 1.5; log2: and a product
LOG_SPECIALS = [0.0, -0.0, -1.0, -0.5, -1e-30, np.inf, -np.inf, np.nan, 1.0, 2.0, 0.5, 8.0,
                1e-45, 1e-40, 1.1754944e-38, 3.4028235e38, 1e-30, -0.9999999, 1.4142135,
                1.4142137, 0.70710677, 0.7071068]


def log_inputs(dtype, name):
    rng = np.random.default_rng(1)
    parts = [np.exp(rng.uniform(-103.0, 88.7, 300_000)), rng.uniform(0.0, 4.0, 300_000),
             1.0 + rng.standard_normal(200_000) * 1e-4, LOG_SPECIALS]
    if name == "log1p":
        parts += [rng.uniform(-1.0, 1.0, 200_000), rng.standard_normal(200_000) * 1e-6]
    x = np.concatenate(parts)
    if dtype == np.float64:
        x = np.concatenate([x, [5e-324, 1e-310, 2.2250738585072014e-308, 1.7976931348623157e308]])
    return x.astype(dtype)


@pytest.mark.parametrize("name", sorted(LOG_PAIRS))
def test_log_float32_results_are_libms_bit_for_bit(name):
    x = log_inputs(np.float32, name)
    _assert_bit_for_bit(x, *_both(LOG_PAIRS[name], x))


@pytest.mark.parametrize("name", sorted(LOG_PAIRS))
def test_log_float64_results_stay_near_libm(name):
    x = log_inputs(np.float64, name)
    _assert_within(x, *_both(LOG_PAIRS[name], x), LOG_ULPS[name])


def _atan_inputs(dtype, seed):
    rng = np.random.default_rng(seed)
    n = 300_000
    magnitudes = np.exp(rng.uniform(-100.0, 88.0, n)) * rng.choice([-1.0, 1.0], n)
    return np.concatenate([rng.standard_normal(n) * 10, magnitudes, rng.uniform(-3, 3, n),
                           SPECIALS, [2.4142134, 2.4142137, 0.66, -0.66]]).astype(dtype)


def test_atan_is_libms_in_float32_and_within_1_ulp_in_float64():
    for dtype in (np.float32, np.float64):
        x = _atan_inputs(dtype, 2)
        got, want = _both((vmath.vatan, math.atan), x)
        if dtype == np.float32:
            _assert_bit_for_bit(x, got, want)
        else:
            _assert_within(x, got, want, 1)


@njit(error_model="numpy", fastmath={"contract"})
def _atan2s(fn, y, x, out):
    for i in range(x.size):
        out[i] = fn(np.float64(y[i]), np.float64(x[i]))


def test_atan2_is_libms_in_float32_with_cs_values_at_zeros_and_infinities():
    x = _atan_inputs(np.float32, 3)
    y = np.random.default_rng(4).permutation(_atan_inputs(np.float32, 5))[:x.size]
    corners = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -2.5],
                       np.float32)
    y = np.concatenate([y, np.repeat(corners, corners.size)])
    x = np.concatenate([x, np.tile(corners, corners.size)])
    got, want = np.empty_like(x), np.empty_like(x)
    _atan2s(vmath.vatan2, y, x, got)
    want[:] = [math.atan2(a, b) for a, b in zip(y.astype(np.float64), x.astype(np.float64))]
    _assert_bit_for_bit(x, got, want)           # (signed zeros included)
    got64, want64 = np.empty(x.size), np.empty(x.size)
    _atan2s(vmath.vatan2, y.astype(np.float64), x.astype(np.float64), got64)
    want64[:] = [math.atan2(a, b) for a, b in zip(y.astype(np.float64), x.astype(np.float64))]
    _assert_within(x, got64, want64, 2)


# float64 ULPs: the ULPs of the function used (expm1: 2, log1p: 3) and the steps after it
DERIVED = {"exp2": (vmath.vexp2, lambda v: math.inf if v > 1100 else 2.0 ** v, 1),
           "log10": (vmath.vlog10, math.log10, 2), "sinh": (vmath.vsinh, math.sinh, 4),
           "cosh": (vmath.vcosh, math.cosh, 2), "atanh": (vmath.vatanh, math.atanh, 4)}


def _derived_inputs(name, dtype):
    rng = np.random.default_rng(6)
    if name == "log10":
        x = np.concatenate([np.exp(rng.uniform(-103.0, 88.7, 200_000)),
                            10.0 ** np.arange(-37, 39), LOG_SPECIALS])
    elif name == "atanh":
        x = np.concatenate([rng.uniform(-1.0, 1.0, 200_000),
                            1.0 - np.exp(rng.uniform(-16.0, 0.0, 50_000)),
                            rng.standard_normal(10_000) * 1e-6, [1.0, -1.0, 1.5, -2.0]])
    else:
        x = np.concatenate([rng.uniform(-160.0, 130.0, 200_000), rng.standard_normal(100_000),
                            np.arange(-150.0, 129.0)])
    return np.concatenate([x, SPECIALS]).astype(dtype)


def _python(ref):
    def value(v):
        if math.isnan(v):
            return math.nan
        try:
            return ref(v)
        except OverflowError:
            return math.copysign(math.inf, v) if ref is not math.cosh else math.inf
        except ValueError:                    # (atanh at or past 1, log10 of a negative)
            return (math.copysign(math.inf, v) if abs(v) == 1.0 and ref is math.atanh
                    else -math.inf if v == 0.0 else math.nan)
    return value


@pytest.mark.parametrize("name", sorted(DERIVED))
def test_exp2_log10_and_hyperbolics_are_libms_in_float32(name):
    ours, ref, ulps = DERIVED[name]
    _assert_libms(ours, ref, ulps, lambda dtype: _derived_inputs(name, dtype))


def _assert_libms(ours, ref, ulps, inputs_of):
    """float32 results libm's bit for bit, float64 ones within ``ulps`` of libm's."""
    for dtype in (np.float32, np.float64):
        x = inputs_of(dtype)
        got = np.empty_like(x)
        with np.errstate(all="ignore"):     # (past float32's range: inf, as intended)
            _kernel(ours)(x, got)
            want = np.array([_python(ref)(float(v)) for v in x]).astype(dtype)
        if dtype == np.float32:
            _assert_bit_for_bit(x, got, want)
        else:
            _assert_within(x, got, want, ulps)


@pytest.mark.parametrize("ours, ref", [(vmath.vasin, math.asin), (vmath.vacos, math.acos)],
                         ids=["asin", "acos"])
def test_asin_and_acos_are_libms_in_float32(ours, ref):
    """By asin's series, through sqrt((1 - |x|) / 2) past a half: within 2 ULP in float64
    (near +-1, 1/2 and 0 too), libm's bit for bit in float32; NaN outside [-1, 1]."""
    rng = np.random.default_rng(8)
    near_one = 1.0 - np.exp(rng.uniform(-17.0, -1.0, 100_000))
    near_half = 0.5 + rng.uniform(-1e-3, 1e-3, 50_000)       # (where the two forms meet)
    x = np.concatenate([rng.uniform(-1.0, 1.0, 300_000), near_one, -near_one, near_half,
                        -near_half,
                        rng.standard_normal(50_000) * 1e-5,
                        [1.0, -1.0, 0.0, -0.0, 1.5, -3.0, 1e-40, -1e-40, np.inf, -np.inf,
                         np.nan]])

    def libm(v):
        return ref(v) if abs(v) <= 1.0 else math.nan
    _assert_libms(ours, libm, 2, x.astype)


# (acosh of a float64 near 1: t = x - 1 is exact, then t (t + 2), its root, a sum and
# log1p each round: 5 ULP seen)
@pytest.mark.parametrize("ours, ref, ulps", [(vmath.vasinh, math.asinh, 4),
                                             (vmath.vacosh, math.acosh, 6)],
                         ids=["asinh", "acosh"])
def test_asinh_and_acosh_are_libms_in_float32(ours, ref, ulps):
    """By log1p below 2**28 and log(2x) past it: within a few ULP in float64, libm's bit for
    bit in float32 (every magnitude, near 1 for acosh); NaN below 1 for acosh."""
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.standard_normal(200_000) * 10,
                        np.exp(rng.uniform(-100.0, 88.0, 200_000)) * rng.choice([-1, 1], 200_000),
                        1.0 + np.exp(rng.uniform(-20.0, 0.0, 100_000)),
                        [0.0, -0.0, 1.0, -1.0, 2.0 ** 28, 3e38, -3e38, 1e-40, np.inf, -np.inf,
                         np.nan]])

    def libm(v):
        try:
            return ref(v)
        except ValueError:                    # (acosh below 1)
            return math.nan
    _assert_libms(ours, libm, ulps, x.astype)


def test_exp2_is_exact_at_integers():
    k = np.arange(-1074.0, 1024.0)
    got = np.empty_like(k)
    _kernel(vmath.vexp2)(k, got)
    np.testing.assert_array_equal(got, 2.0 ** k)


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_sin_cos_tan_kernels_give_libms_float32_results(name):
    """vmath's reduction below 1e6, libm's past it (the kernel's second pass): every
    float32 result is libm's, bit for bit, huge, infinite and NaN inputs too."""
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(300_000) * 10, rng.uniform(-1e6, 1e6, 100_000),
                        rng.standard_normal(50_000) * 1e-3, np.exp(rng.uniform(-100, 88, 50_000)),
                        SPECIALS, [1e6, -1e6, 999999.94, 1.5707964, 3.1415927, 0.7853982]]
                       ).astype(np.float32)
    got = unary.unary(name, x)
    want = np.array([_python(getattr(math, name))(float(v)) for v in x]).astype(np.float32)
    _assert_bit_for_bit(x, got, want)


def test_log2_is_exact_at_powers_of_two():
    powers = 2.0 ** np.arange(-1074, 1024)
    out, _ = _both(LOG_PAIRS["log2"], powers)
    np.testing.assert_array_equal(out, np.arange(-1074, 1024))


def test_ulp_distance_sees_a_one_ulp_change():
    # the helper the checks above lean on, for float32
    a = np.array([1.0, -2.5], np.float32)
    assert ulp_distance(np.nextafter(a, np.float32(np.inf)), a).tolist() == [1, 1]


def _float32_range(lo, hi, step=1):
    """Every ``step``-th float32 from lo to hi (both positive)."""
    a, b = (np.array(v, np.float32).view(np.uint32) for v in (lo, hi))
    return np.arange(a, b + 1, step, dtype=np.uint32).view(np.float32)


def _float32_shortcut_inputs(name):
    """Random values, the specials, NaNs of both signs and several payloads, and dense runs
    of float32 where each shortcut's branches and clamps meet: for tanh tiny values (tanh(x)
    = x), the first change of exponent k (|x| = ln(2)/4), the saturation to 1 near 9.011 and
    the cap at 10; for exp, exp2, sigmoid and silu, where the results overflow, turn
    subnormal and round to 0 or 1 in float32, and the clamps."""
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345, 0x7FFFFFFF],
                    np.uint32).view(np.float32)
    runs = {"tanh": [_float32_range(2.0 ** -29, 2.0 ** -27, 97), _float32_range(0.17, 0.18),
                     _float32_range(8.95, 9.1), _float32_range(9.99, 10.01)],
            "exp": [_float32_range(88.6, 89.2, 7), _float32_range(87.2, 87.5, 7),
                    _float32_range(103.8, 104.2, 7), _float32_range(708.3, 709.6),
                    _float32_range(744.9, 745.5)],
            "exp2": [_float32_range(127.9, 129.1, 7), _float32_range(125.9, 126.1, 7),
                     _float32_range(148.9, 150.2, 7), _float32_range(999.9, 1000.1)],
            "sigmoid": [_float32_range(16.5, 17.5, 7), _float32_range(87.2, 87.5, 7),
                        _float32_range(103.8, 104.2, 7), _float32_range(708.3, 709.6),
                        _float32_range(744.9, 745.5)]}
    runs["silu"] = runs["sigmoid"] + [_float32_range(107.0, 110.0, 7)]
    runs["rsqrt"] = [_float32_range(0.999, 1.001), _float32_range(3.999, 4.001),
                     _float32_range(3e38, 3.4028235e38, 97)]
    # the sixths: where x + 3 is clamped or tiny (x near 3 and -3: the inputs' negations
    # are added below)
    runs["hardsigmoid"] = runs["hardswish"] = [_float32_range(2.999, 3.001)]
    runs["softplus"] = runs["sigmoid"] + [_float32_range(19.9, 20.1)]
    # gelu: where z**2 = x**2 / 2 passes 709 (x = 37.66) and vphi's cap (z = 30)
    runs["gelu"] = [_float32_range(5.0, 6.0, 7), _float32_range(37.5, 37.8),
                    _float32_range(42.3, 42.5), _float32_range(1e3, 1e38, 2 ** 16)]
    rng = np.random.default_rng(1)
    wide = {"exp2": rng.uniform(-160.0, 140.0, 400_000)}.get(name, np.empty(0))
    x = np.concatenate([inputs(np.float32), wide.astype(np.float32), nans, *runs[name],
                        _float32_range(1e-45, 1e-38, 4099)])
    return np.concatenate([x, -x])


def _assert_same_bits(x, got, want):
    # signed zeros included; NaN where the general kernel gives NaN (a NaN's sign and
    # payload are the compiler's: LLVM moves a negation across a subtraction, which IEEE
    # allows to change a NaN's sign)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(want) & np.isnan(got))
    assert same.all(), (x[~same][:5], got[~same][:5], want[~same][:5])
    assert np.isnan(want[np.isnan(x)]).all()


SHORTCUTS = ["tanh", "exp", "exp2", "sigmoid", "silu", "gelu", "rsqrt", "hardsigmoid",
             "hardswish"]


@pytest.mark.parametrize("name", SHORTCUTS)
def test_float32_shortcuts_give_the_general_kernels_bits(name):
    # the float32 path (FORWARD_F32's rule) against the general kernel
    code = UNARY[name].code
    assert code in unary.F32_KERNELS
    x = _float32_shortcut_inputs(name)
    want = np.empty_like(x)
    with np.errstate(all="ignore"):
        unary.KERNELS[code](x, want, 0.0, 0.0)
        got = unary.unary(name, x)
    _assert_same_bits(x, got, want)


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", ["rsqrt", "hardsigmoid", "hardswish"])
def test_float32_shortcuts_give_the_general_kernels_bits_for_every_float32(name):
    # every one of the 2**32 bit patterns, 2**24 at a time
    code = UNARY[name].code
    want = np.empty(1 << 24, np.float32)
    got = np.empty_like(want)
    for start in range(0, 1 << 32, 1 << 24):
        x = np.arange(start, start + (1 << 24), dtype=np.uint32).view(np.float32)
        with np.errstate(all="ignore"):
            unary.KERNELS[code](x, want, 0.0, 0.0)
            unary.F32_KERNELS[code](x, got)
        same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(want) & np.isnan(got))
        assert same.all(), (x[~same][:5], got[~same][:5], want[~same][:5])


@pytest.mark.parametrize("name", ["gelu", "silu", "softplus"])
def test_float32_gradient_shortcuts_give_the_general_kernels_values(name):
    # the float32 path (BACKWARD_F32's rule) against the general gradient kernel, for
    # finite output gradients of both signs and sizes and zeros: the same bits, but for the
    # sign of a zero where the derivative underflows float32 (there the general kernel's
    # float64 one is a subnormal of either sign, the shortcut's 0)
    code = UNARY[name].code
    assert code in unary.GRAD_F32_KERNELS
    x = _float32_shortcut_inputs(name)
    g = np.random.default_rng(2).standard_normal(x.size).astype(np.float32) * 4
    g[::97], g[1::101], g[2::103] = 0.0, 3e38, -1e30
    want = np.empty_like(x)
    with np.errstate(all="ignore"):
        y = unary.unary(name, x)
        unary.GRAD_KERNELS[code](x, y, g, want, 0.0, 0.0)
        got = unary.unary_backward(name, x, y, g)
    zeros = (want == 0) & (got == 0)
    _assert_same_bits(x, np.where(zeros, np.float32(0), got), np.where(zeros, np.float32(0), want))


def test_float32_tanh_shortcut_is_libms_rounding():
    x = _float32_shortcut_inputs("tanh")
    want = np.empty_like(x)
    _kernel(math.tanh)(x, want)
    got = unary.unary("tanh", x)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), (x[~same][:5], got[~same][:5], want[~same][:5])
    ones = np.abs(x) > 13 * math.log(2)      # where 1 - tanh(x) < 2**-25: float32 +-1
    assert (got[ones] == np.sign(x[ones])).all()
    assert (np.abs(got[~ones & ~np.isnan(x)]) < 1).all()


ERF_SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-45, 0.5, -0.5,
                0.49999997, 10.05, 10.06, -10.0, 26.0, 27.5, 3e38, -3e38]


@pytest.mark.parametrize("ours, ref, ulps", [(vmath.verfc, math.erfc, 30),
                                             (vmath.verf, math.erf, 12)],
                         ids=["erfc", "erf"])
def test_erf_and_erfc_are_libms_in_float32(ours, ref, ulps):
    # float64: within about 4e-15 relative (the fit and two exps), ulps of it allowed
    rng = np.random.default_rng(3)
    base = np.concatenate([rng.uniform(-12.0, 12.0, 400_000), rng.standard_normal(400_000),
                           rng.standard_normal(100_000) * 1e-3, ERF_SPECIALS])
    _assert_libms(ours, ref, ulps, base.astype)


def test_the_normal_cdf_for_gelu_is_within_1e_9_of_libms_erfc():
    # vphi keeps erfc's fit to degree 16 (the dropped terms sum to ~1e-10) and one exp:
    # far inside a float32 result's 6e-8, so gelu's float32 values stay correctly rounded.
    x = np.concatenate([np.linspace(-40.0, 40.0, 200_001), inputs(np.float64)[:200_000],
                        [0.0, -0.0, 1e-300, -1e-300, 8.0, -8.0]])
    got = np.empty_like(x)
    _kernel(vmath.vphi)(x, got)
    want = np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in x])
    tiny = want < 1e-300                 # (where erfc leaves float64's normal range)
    assert np.all(np.abs(got - want)[~tiny] <= 1e-9 * want[~tiny])
    assert np.all(np.abs(got - want)[tiny] <= 1e-300)
    specials = np.array([np.inf, -np.inf, np.nan])
    out = np.empty(3)
    _kernel(vmath.vphi)(specials, out)
    assert out[0] == 1.0 and out[1] == 0.0 and np.isnan(out[2])
