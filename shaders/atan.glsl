// atan and atan2 accurate to a few ULP in float32 (unary.comp through trig.glsl, and
// binary.comp), and atan2's gradient; needs common.glsl.

const float PIO4_F = 0.78539816339744831;
// pi/2 and pi as float32 plus the remainder, for sums that cancel against them
const float PIO2_HI = 1.5707963267948966, PIO2_LO = -4.371139000186241e-08;
const float PI_HI = 3.1415926535897931, PI_LO = -8.742278000372482e-08;

// Cephes' polynomial for atan(t), |t| <= tan(pi/8).
float atan_poly(float t) {
    float z = t * t;
    return (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
            - 3.33329491539e-1) * z * t + t;
}

// Cephes' atanf.c: the argument brought into [-tan(pi/8), tan(pi/8)] by
// atan(x) = pi/2 + atan(-1/x) or pi/4 + atan((x - 1)/(x + 1)), then a polynomial.
float atan_f(float x) {
    float ax = abs(x), base = 0.0, t = ax;
    if (ax > 2.414213562373095) {
        base = PIO2_HI;
        t = -1.0 / ax;                           // (0 past 2^126 on some devices: atan is pi/2)
    } else if (ax > 0.41421356237309503) {
        base = PIO4_F;
        t = (ax - 1.0) / (ax + 1.0);
    }
    float y = base + atan_poly(t);
    return signbit_f(x) ? -y : y;
}

// 2^k as a float, for k in [-126, 127] (from the bits: no ldexp).
float pow2(int k) { return intBitsToFloat((k + 127) << 23); }

// v 2^k by two exact products; the first is never subnormal where the result is normal
// (each moves v the same way). Past |k| = 252 the result of any v in (2^-24, 2^2) is 0 or
// inf either way, so k is clamped there.
float scale2(float v, int k) {
    k = clamp(k, -252, 252);
    return v * pow2(k / 2) * pow2(k - k / 2);
}

// |v| = m 2^e with m in [1, 2) (0 for 0), read from the bits: exact for subnormals too,
// which a device that flushes them would read as 0.
float split_mag(float v, out int e) {
    int b = floatBitsToInt(v) & 0x7fffffff, k = b >> 23;
    if (k != 0) {
        e = k - 127;
        return intBitsToFloat((b & 0x7fffff) | 0x3f800000);
    }
    float m = float(b);                          // (a subnormal: its integer significand)
    int f = (floatBitsToInt(m) >> 23) - 127;     // m = 1.x 2^f, exactly
    e = f - 149;
    return b == 0 ? 0.0 : intBitsToFloat((floatBitsToInt(m) & 0x7fffff) | 0x3f800000);
}

// atan2(y, x) with C's special values: atan of the smaller magnitude over the larger (in
// [0, 1], where atan_f is accurate), then reflected into the quadrant of (x, y). The
// quotient is of the significands (1 to 2^24, so a device that divides through a
// reciprocal cannot flush it), scaled by the exponents' difference.
float atan2_f(float y, float x) {
    if (isnan(x) || isnan(y)) return x + y;
    int bx = floatBitsToInt(x) & 0x7fffffff, by = floatBitsToInt(y) & 0x7fffffff;
    const int INF = 0x7f800000;
    float a;
    if (bx == INF && by == INF) {
        a = PIO4_F;
    } else if (by == 0 || bx == INF) {
        a = 0.0;
    } else if (by == INF || bx == 0) {
        a = PIO2_HI;
    } else if (min(bx, by) >= 0x00800000 && max(bx, by) < 0x7e800000 &&
               abs(bx - by) < (64 << 23)) {
        // both normal, below 2^126 and within 2^64 of each other: the quotient of the
        // magnitudes themselves is normal and no reciprocal flushes (the common case)
        // (Cephes' reduction of lo / hi past tan(pi/8), pi/4 + atan((lo - hi) / (lo + hi)),
        // formed from lo and hi themselves: one division on either side)
        float ax = intBitsToFloat(bx), ay = intBitsToFloat(by);
        float lo = min(ax, ay), hi = max(ax, ay);
        bool past = lo > 0.41421356237309503 * hi;
        float v = (past ? PIO4_F : 0.0) + atan_poly((past ? lo - hi : lo) / (past ? lo + hi : hi));
        a = by > bx ? (PIO2_HI - v) + PIO2_LO : v;
    } else {
        int ex, ey;
        float mx = split_mag(x, ex), my = split_mag(y, ey);
        a = by > bx ? (PIO2_HI - atan_f(scale2(mx / my, ex - ey))) + PIO2_LO
                    : atan_f(scale2(my / mx, ey - ex));
    }
    if (signbit_f(x)) a = (PI_HI - a) + PI_LO;
    return signbit_f(y) ? -a : a;
}

// (v 2^k) / d, d in [1, 8], rounded once: the numerator scaled first where it stays a
// normal number, else the quotient (which is then below the normal range, or past it).
float quotient(float v, float d, int k) {
    float n = scale2(v, k);
    return (isinf(n) || abs(n) < 1.17549435e-38) ? scale2(v / d, k) : n / d;
}

// g (d/dy, d/dx) atan2(y, x) = g (x, -y) / (x^2 + y^2), from the significands and
// exponents of g, x and y (exact, subnormals too): x^2 + y^2 = d 2^2e with e the larger
// exponent (d in [1, 8]; the smaller operand, scaled, may flush there, where it does not
// count), then each part one quotient of significands scaled once. As PyTorch's where both
// are 0 (NaN) or one is infinite (0, or NaN from inf * 0).
vec2 atan2_grad(float y, float x, float g) {
    if (isnan(x) || isnan(y)) return vec2(x + y);
    if (isinf(x) || isinf(y)) {               // g x 0 and -g y 0, spelled out (a compiler
        bool g_finite = !isinf(g) && !isnan(g);  // may fold v * 0.0 to 0.0)
        return vec2(g_finite && !isinf(x) ? 0.0 : f_nan(), g_finite && !isinf(y) ? 0.0 : f_nan());
    }
    int ex, ey, eg;
    float mx = split_mag(x, ex), my = split_mag(y, ey);
    int e = max(ex, ey);
    float xs = scale2(mx, ex - e), ys = scale2(my, ey - e);
    float d = xs * xs + ys * ys;
    if (isnan(g)) return vec2(f_nan());
    if (d == 0.0) return vec2(isinf(g) ? f_nan() : 0.0);     // 0 at the origin, as PyTorch's
    if (isinf(g) || g == 0.0) {               // g times a finite quotient: inf, NaN or 0
        float ix = mx == 0.0 ? f_nan() : g, iy = my == 0.0 ? f_nan() : g;
        return isinf(g) ? vec2(signbit_f(x) ? -ix : ix, signbit_f(y) ? iy : -iy) : vec2(0.0);
    }
    float mg = split_mag(g, eg);
    float gx = quotient(mg * mx, d, eg + ex - 2 * e), gy = quotient(mg * my, d, eg + ey - 2 * e);
    bool sg = signbit_f(g);
    return vec2(sg != signbit_f(x) ? -gx : gx, sg != signbit_f(y) ? gy : -gy);
}
