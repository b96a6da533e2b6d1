// atan and atan2 accurate to a few ULP in float32 (unary.comp through trig.glsl, and
// binary.comp), and atan2's gradient; needs common.glsl.

const float PIO4_F = 0.78539816339744831;
// pi/2 and pi as float32 plus the remainder, for sums that cancel against them
const float PIO2_HI = 1.5707963267948966, PIO2_LO = -4.371139000186241e-08;
const float PI_HI = 3.1415926535897931, PI_LO = -8.742278000372482e-08;

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
    float z = t * t;
    float y = base + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
                       - 3.33329491539e-1) * z * t + t);
    return signbit_f(x) ? -y : y;
}

// v 2^e for |e| up to 2 x 149 (ldexp alone is defined for |e| <= 128, and a subnormal
// operand's exponent is down to -149).
float ldexp2(float v, int e) { return ldexp(ldexp(v, e / 2), e - e / 2); }

// atan2(y, x) with C's special values: atan of the smaller magnitude over the larger (in
// [0, 1], where atan_f is accurate), then reflected into the quadrant of (x, y). Both are
// scaled by a power of two first (exactly), so the divisor is near 1: a device that divides
// by way of a reciprocal would flush 1/|x| to 0 for |x| past 2^126.
float atan2_f(float y, float x) {
    if (isnan(x) || isnan(y)) return x + y;
    float ax = abs(x), ay = abs(y), a;
    if (isinf(ax) && isinf(ay)) {
        a = PIO4_F;
    } else if (ay == 0.0 || isinf(ax) || isinf(ay)) {
        a = ay == 0.0 || isinf(ax) ? 0.0 : PIO2_HI;      // (0 / 0 where both are 0)
    } else {
        int e;
        frexp(max(ax, ay), e);
        float sx = ldexp2(ax, -e), sy = ldexp2(ay, -e);
        a = sy > sx ? (PIO2_HI - atan_f(sx / sy)) + PIO2_LO : atan_f(sy / sx);
    }
    if (signbit_f(x)) a = (PI_HI - a) + PI_LO;
    return signbit_f(y) ? -a : a;
}

// g (d/dy, d/dx) atan2(y, x) = g (x, -y) / (x^2 + y^2), with x and y scaled by a power of
// two first (exactly), so the squares neither overflow nor flush; as PyTorch's where both
// are 0 (NaN) or one is infinite (0, or NaN from inf * 0).
vec2 atan2_grad(float y, float x, float g) {
    if (isnan(x) || isnan(y)) return vec2(x + y);
    if (isinf(x) || isinf(y)) {               // g x 0 and -g y 0, spelled out (a compiler
        bool g_finite = !isinf(g) && !isnan(g);  // may fold v * 0.0 to 0.0)
        return vec2(g_finite && !isinf(x) ? 0.0 : f_nan(), g_finite && !isinf(y) ? 0.0 : f_nan());
    }
    int e;
    frexp(max(abs(x), abs(y)), e);
    float xs = ldexp2(x, -e), ys = ldexp2(y, -e);
    float d = xs * xs + ys * ys;
    return vec2(g * ldexp2(xs / d, -e), -g * ldexp2(ys / d, -e));
}
