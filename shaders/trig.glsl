// Circular and hyperbolic functions, their inverses, erf and erfc for unary.comp: forms
// accurate to a few ULP in float32, built from + - * /, exp, log and sqrt, whose Vulkan
// bounds the tolerance table (dualgrad/testing/tolerances.py) starts from. GLSL's own sin,
// cos and tan are bounded only to 2^-11 absolute inside [-pi, pi] and not at all outside,
// its asin ... atanh only through those. Needs common.glsl and unary.comp's
// log1p_f and LN2; atan.glsl holds atan and pi's parts.

#include "atan.glsl"
const float TWO_OVER_SQRTPI = 1.1283791670955126;

// The bits of 2/pi, 32 a word, after a word of zeros (so a window may start before them):
// word i by selects, not an array (an indexed constant array is copied to local memory on
// every call by some compilers).
uint two_over_pi(int i) {
    return i <= 3 ? (i <= 1 ? (i == 0 ? 0u : 0xA2F9836Eu) : (i == 2 ? 0x4E441529u : 0xFC2757D1u))
                  : (i <= 5 ? (i == 4 ? 0xF534DDC0u : 0xDB629599u)
                            : (i == 6 ? 0x3C439041u : 0xFE5163ABu));
}

// ax = q pi/2 + r with |r| <= pi/4 (a rounding past it below 6000), for finite ax >= 0:
// returns r, q mod 4 in q. Below pi/4 r is ax; below 6000 Cody and Waite's. Above, Payne
// and Hanek's reduction in integers: ax = m 2^e (m of 24 bits) times
// the 96 bits of 2/pi from the one worth 2^(1-e) (earlier bits add multiples of 4 quadrants)
// gives the quadrant and 94 bits of its fraction, short of the true value by less than
// 2^-70 of a quadrant. So r keeps its relative accuracy everywhere, even for the float32
// closest to a multiple of pi/2; its error is the fraction's conversion and the product
// by pi/2 (about 2 ULP).
float reduce_half_pi(float ax, out uint q) {
    q = 0u;
    if (ax < PIO4_F) return ax;
    if (ax < 6000.0) {
        // Cody and Waite's reduction, a third of the work: pi/2 in five parts, the first
        // four of at most 12 bits, so that q (below 2^12) times each is exact and each
        // difference is exact or rounded once at r's own scale; the parts sum to pi/2
        // within 2^-73, which keeps 2^-33 of r's relative accuracy even at the float32
        // nearest a multiple of pi/2 below 6000 (r about 2^-28, at 252.898).
        float qf = roundEven(ax * 0.63661975);
        q = uint(qf) & 3u;
        float r = ax - qf * 1.5703125;
        r -= qf * 4.837512969970703e-4;
        r -= qf * 7.549533620476723e-8;
        r -= qf * 2.5579538487363607e-12;
        return r - qf * 5.390302953474238e-15;
    }
    uint bits = floatBitsToUint(ax);
    int k0 = int(bits >> 23) - 120;              // the window's first bit: e + 30, >= 6
    uint m = (bits & 0x7fffffu) | 0x800000u;
    uint sh = uint(k0 & 31), w0, w1, w2;
    if (k0 < 32) {                               // below 2^25: the first words, as constants
        w0 = 0xA2F9836Eu >> (32u - sh);
        w1 = (0xA2F9836Eu << sh) | (0x4E441529u >> (32u - sh));
        w2 = (0x4E441529u << sh) | (0xFC2757D1u >> (32u - sh));
    } else {
        int w = k0 >> 5;
        w0 = two_over_pi(w);
        w1 = two_over_pi(w + 1);
        w2 = two_over_pi(w + 2);
        if (sh != 0u) {                          // (a shift by 32 is undefined)
            w0 = (w0 << sh) | (w1 >> (32u - sh));
            w1 = (w1 << sh) | (w2 >> (32u - sh));
            w2 = (w2 << sh) | (two_over_pi(w + 3) >> (32u - sh));
        }
    }
    // m (w0 w1 w2): only its low 96 bits matter (4 quadrants and below), p1 p2 p3
    uint h1, l1, h2, l2, carry;
    umulExtended(m, w1, h1, l1);
    umulExtended(m, w2, h2, l2);
    uint p3 = l2, p2 = uaddCarry(l1, h2, carry), p1 = m * w0 + h1 + carry;
    q = p1 >> 30;
    uint f1 = p1 & 0x3fffffffu, f2 = p2, f3 = p3;
    bool past_half = (f1 & 0x20000000u) != 0u;
    if (past_half) {                             // r from the next quadrant: 2^94 - f
        q += 1u;
        f3 = ~f3 + 1u;
        uint c = p3 == 0u ? 1u : 0u;
        f2 = ~f2 + c;
        c = (c == 1u && p2 == 0u) ? 1u : 0u;
        f1 = (~f1 + c) & 0x3fffffffu;
    }
    q &= 3u;
    float hi = float((f1 << 2) | (f2 >> 30)) * 2.3283064365386963e-10;     // 2^-32
    float lo = float((f2 << 2) | (f3 >> 30)) * 5.4210108624275222e-20;     // 2^-64
    float r = (hi + lo) * PIO2_HI;
    return past_half ? -r : r;
}

// sin and cos on [-pi/4, pi/4]: Cephes' minimax polynomials (sinf.c, cosf.c)
float sin_poly(float r) {
    float z = r * r;
    return ((-1.9515295891e-4 * z + 8.3321608736e-3) * z - 1.6666654611e-1) * z * r + r;
}

float cos_poly(float r) {
    float z = r * r;
    return ((2.443315711809948e-5 * z - 1.388731625493765e-3) * z + 4.166664568298827e-2)
           * z * z - 0.5 * z + 1.0;
}

float sin_f(float x) {
    if (isinf(x) || isnan(x)) return f_nan();
    uint q;
    float r = reduce_half_pi(abs(x), q);
    float v = (q & 1u) == 0u ? sin_poly(r) : cos_poly(r);
    v = q >= 2u ? -v : v;
    return signbit_f(x) ? -v : v;                // odd: keeps -0
}

float cos_f(float x) {
    if (isinf(x) || isnan(x)) return f_nan();
    uint q;
    float r = reduce_half_pi(abs(x), q);
    float v = (q & 1u) == 0u ? cos_poly(r) : sin_poly(r);
    return (q == 1u || q == 2u) ? -v : v;
}

float tan_f(float x) {
    if (isinf(x) || isnan(x)) return f_nan();
    uint q;
    float r = reduce_half_pi(abs(x), q);
    float s = sin_poly(r), c = cos_poly(r);
    float v = (q & 1u) == 0u ? s / c : -c / s;
    return signbit_f(x) ? -v : v;
}

// sqrt to about 1 ULP: z inversesqrt(z) (2 ULP) and one Newton step, its residual z - s^2
// formed with at most half an ULP of z's error (no division: r/2 stands for 1/(2s)). Past
// 1e37, where s^2 may overflow, sqrt(z) = 2^32 sqrt(z 2^-64) (both scalings exact).
float sqrt_acc(float z) {
    if (!(z > 0.0) || isinf(z)) return sqrt(z);  // (0, inf, NaN, negatives)
    float scale = 1.0;
    if (z > 1e37) {
        z *= 5.4210108624275222e-20;
        scale = 4294967296.0;
    }
    float r = inversesqrt(z), s = z * r;
    return (s + (0.5 * r) * (z - s * s)) * scale;
}

// asin on [-0.5, 0.5]: Cephes' asinf.c polynomial
float asin_poly(float t) {
    float z = t * t;
    return ((((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z
             + 7.4953002686e-2) * z + 1.6666752422e-1) * z * t + t;
}

// Past |x| = 0.5, asin(x) = pi/2 - 2 asin(sqrt((1 - |x|) / 2)): 1 - |x| is exact there.
// The square root is taken on every lane and the sides chosen by selects, so a warp of
// inputs on both sides runs the polynomial once, not once a side.
float asin_f(float x) {
    float ax = abs(x);
    if (!(ax <= 1.0)) return f_nan();
    bool big = ax > 0.5;
    float s = sqrt_acc(0.5 * (1.0 - ax));
    float p = asin_poly(big ? s : ax);
    float y = big ? (PIO2_HI - 2.0 * p) + PIO2_LO : p;
    return signbit_f(x) ? -y : y;
}

// 2 asin(s) above 0.5, pi - 2 asin(s) below -0.5 (1 + x = 1 - |x|), pi/2 - asin(x) between:
// one polynomial, as asin_f.
float acos_f(float x) {
    float ax = abs(x);
    if (!(ax <= 1.0)) return f_nan();
    bool big = ax > 0.5;
    float s = sqrt_acc(0.5 * (1.0 - ax));
    float a = asin_poly(big ? s : x);
    a = big ? 2.0 * a : a;
    if (x > 0.5) return a;
    return x < -0.5 ? (PI_HI - a) + PI_LO : (PIO2_HI - a) + PIO2_LO;
}

// e^|x| / 2 with no overflow below sinh's and cosh's own: exp(|x|) halved (exactly), and
// past 88 exp(|x| - 80) e^80/2 (|x| - 80 is exact there; the constant rounds by 0.02
// ULP). One product: NVIDIA's compiler was seen to turn (h/2) h, h = exp(|x|/2), into a
// form that overflows first.
const float HALF_E80 = 2.770311192196755e+34;

float half_exp_abs(float x) {
    float ax = abs(x);
    return ax < 88.0 ? 0.5 * exp(ax) : exp(ax - 80.0) * HALF_E80;
}

// g e^|x| / 2 past 88, finite wherever the result is: (g exp(|x| - 80)) e^80/2
float g_half_exp_abs(float g, float x) {
    return (g * exp(abs(x) - 80.0)) * HALF_E80;
}

// A Taylor polynomial below 1 (to x^11/11!, truncated below 2^-32), else e - 1/(4e) with
// e = e^|x| / 2.
float sinh_f(float x) {
    float ax = abs(x), y;
    if (ax < 1.0) {
        float z = ax * ax;
        y = ax + ax * z * (1.0 / 6.0 + z * (1.0 / 120.0 + z * (1.0 / 5040.0
                  + z * (1.0 / 362880.0 + z * (1.0 / 39916800.0)))));
    } else {
        float e = half_exp_abs(ax);
        y = e - 0.25 / e;
    }
    return signbit_f(x) ? -y : y;
}

float cosh_f(float x) {
    float e = half_exp_abs(x);
    return e + 0.25 / e;
}

// Up to 1, x + x z P(z) with z = x^2 and P a least-squares fit of (asinh(x)/x - 1)/z on
// [0, 1] (degree 8: within 0.8 ULP); above, log(|x| + sqrt(x^2 + 1)), whose argument is
// past 2.4 (outside [0.5, 2], where log's bound is only absolute), and log|x| + ln2 past
// 1e18 (where x^2 + 1 would overflow). No division and no log1p: a warp of inputs on both
// sides runs one polynomial, one square root and one logarithm. (The fits' coefficients
// are written out, as two_over_pi's words are, not kept in an indexed array.)
float asinh_f(float x) {
    float ax = abs(x), z = ax * ax, y;
    if (ax <= 1.0) {
        float q = -0.0005214084521867335;
        q = fma(q, z, 0.0029765337239950895);
        q = fma(q, z, -0.008059144951403141);
        q = fma(q, z, 0.014581356197595596);
        q = fma(q, z, -0.021542996168136597);
        q = fma(q, z, 0.030236003920435905);
        q = fma(q, z, -0.04462962597608566);
        q = fma(q, z, 0.07499952614307404);
        q = fma(q, z, -0.1666666567325592);
        y = fma(ax, z * q, ax);
    } else {
        y = ax > 1e18 ? log(ax) + LN2 : log(ax + sqrt_acc(z + 1.0));   // (NaN: the second)
    }
    return signbit_f(x) ? -y : y;
}

// Up to 2, sqrt(2t) R(t) with t = x - 1 (exact there) and R a least-squares fit of
// acosh(1 + t)/sqrt(2t) on [0, 1] (degree 7: within 2 ULP); above, log(x + sqrt(x^2 - 1)),
// its argument past 3.7; log x + ln2 past 1e18. One square root serves both sides.
float acosh_f(float x) {
    if (!(x >= 1.0)) return f_nan();
    if (x > 1e18) return log(x) + LN2;
    float t = x - 1.0;
    bool big = x > 2.0;
    float s = sqrt_acc(big ? x * x - 1.0 : t + t);
    if (big) return log(x + s);
    float r = -2.651313116075471e-05;
    r = fma(r, t, 0.00017405967810191214);
    r = fma(r, t, -0.0006295557832345366);
    r = fma(r, t, 0.0018693027086555958);
    r = fma(r, t, -0.005573295056819916);
    r = fma(r, t, 0.01874915510416031);
    r = fma(r, t, -0.08333329111337662);
    r = fma(r, t, 1.0);
    return s * r;
}

// log1p(2|x| / (1 - |x|)) / 2: 1 - |x| is exact where it is small.
float atanh_f(float x) {
    float ax = abs(x);
    float y = ax < 1.0 ? 0.5 * log1p_f(2.0 * ax / (1.0 - ax)) : (ax == 1.0 ? f_inf() : f_nan());
    return signbit_f(x) ? -y : y;
}

// g c exp(arg) for arg = -x^2 + a (x^2 = sq + lo exactly, common.glsl's square_lo), where
// it may be tiny: below -64 the exponent is raised by 16 (exactly: arg's last bit is
// coarser than 2^-4 there) and e^-16 moved into c, and c comes last, so that exp's result
// and the product with g stay normal and only the last product rounds into the
// subnormals (where a device may flush).
float scaled_exp(float arg, float lo, float c, float g) {
    if (arg < -64.0) {
        arg += 16.0;
        c *= 1.1253517471925912e-07;             // e^-16
    }
    return ((g * exp(arg)) * (1.0 - lo)) * c;
}

// g erf'(x) = g 2/sqrt(pi) exp(-x^2)
float erf_slope(float x, float g) {
    float sq = x * x;
    return scaled_exp(-sq, square_lo(x, sq), TWO_OVER_SQRTPI, g);
}

// erfc(z) for z >= 0 by common.glsl's fit.
float erfc_nonneg(float z) {
    float t = 1.0 / (1.0 + 0.5 * z);
    float sq = z * z;
    return scaled_exp(erfc_fit(t) - sq, square_lo(z, sq), 1.0, t);
}

float erfc_f(float x) {
    float e = erfc_nonneg(abs(x));               // (once a warp, whatever the signs)
    return x >= 0.0 ? e : 2.0 - e;               // (NaN: 2 - NaN)
}

// erfc(z) for z in [0.5, 3.92], where erf needs it only to float32's precision near 1:
// exp(-z^2 + q(z)), q a least-squares fit of log(erfc(z)) + z^2 on that range (degree 10;
// with an exact exp, 1 - this is within 1.2 ULP of erf), -z^2 + q in one fma. No division
// and no exact square, which erfc_nonneg needs for its relative accuracy far out.
float erfc_near(float z) {
    float q = -1.5639243144960346e-07;
    q = fma(q, z, 3.726869181264192e-06);
    q = fma(q, z, -3.740513420780189e-05);
    q = fma(q, z, 0.0001903511001728475);
    q = fma(q, z, -0.0003181087377015501);
    q = fma(q, z, -0.0023984306026250124);
    q = fma(q, z, 0.02231118269264698);
    q = fma(q, z, -0.10532040148973465);
    q = fma(q, z, 0.36466631293296814);
    q = fma(q, z, -1.1287481784820557);
    q = fma(q, z, 4.557416104944423e-05);
    return exp(fma(-z, z, q));
}

// Its Taylor series below 0.5 (to x^15, truncated below 2^-34 of the result), where
// 1 - erfc(x) would lose bits; 1 - erfc(|x|) above, and 1 from 3.92 (erfc is below half
// an ULP of 1 there).
float erf_f(float x) {
    float ax = abs(x), y;
    if (ax < 0.5) {
        float z = ax * ax;
        y = TWO_OVER_SQRTPI * ax * (1.0 + z * (-1.0 / 3.0 + z * (1.0 / 10.0 + z * (-1.0 / 42.0
                + z * (1.0 / 216.0 + z * (-1.0 / 1320.0 + z * (1.0 / 9360.0
                + z * (-1.0 / 75600.0))))))));
    } else {
        y = ax >= 3.92 ? 1.0 : 1.0 - erfc_near(ax);      // (NaN: the second)
    }
    return signbit_f(x) ? -y : y;
}
