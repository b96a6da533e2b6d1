#version 460
// Elementwise y = op(x) and its backward dx = op'(x, y) * g; the twin of
// dualgrad/cpu/unary.py (its forward and backward rules). OP is a specialization
// constant, BACKWARD selects the gradient kernel. LOW 1 (float16) or 2 (bfloat16): every
// buffer holds that 16-bit type, two elements to a 32-bit word; each is widened to float32
// (exactly), computed on in float32 and the result rounded to nearest even.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint BACKWARD = 0;
layout(constant_id = 2) const uint LOW = 0;

layout(push_constant) uniform Push {
    Floats x; Floats y; Floats g; Floats out_;
    uint n; float a; float b;
} p;

const float SOFTPLUS_THRESHOLD = 20.0;     // PyTorch's default: softplus(x) is x above it
const float LN2 = 0.6931471805599453, LOG2E = 1.4426950408889634;
const float LOG10_2 = 0.3010299956639812, LOG10E = 0.4342944819032518;
const float SELU_ALPHA = 1.6732632423543772, SELU_SCALE = 1.0507009873554805;
const float GELU_2K = 1.5957691216057308, GELU_C = 0.044715;   // 2 sqrt(2/pi); tanh form

// log(1 + e) for e in [-0.5, 1] as 2 atanh(s), s = e / (2 + e), |s| <= 1/3, by its odd
// series to s^17 (truncated below 2^-29 of the result): only + - * and one division, so
// no log's absolute error where the result is small.
float log1p_series(float e) {
    float s = e / (2.0 + e), s2 = s * s;
    float q = 1.0 / 17.0;
    q = q * s2 + 1.0 / 15.0;
    q = q * s2 + 1.0 / 13.0;
    q = q * s2 + 1.0 / 11.0;
    q = q * s2 + 1.0 / 9.0;
    q = q * s2 + 1.0 / 7.0;
    q = q * s2 + 1.0 / 5.0;
    q = q * s2 + 1.0 / 3.0;
    return 2.0 * s + 2.0 * s * (s2 * q);
}

// log(1 + x): x itself below 1e-8 (x^2/2 is below its last bit; the series' x / (2 + x)
// would be subnormal for the smallest x, which a device may flush), the atanh series on
// [-0.5, 1], log(1 + x) outside (NaN too).
float log1p_f(float x) {
    if (abs(x) < 1e-8) return x;
    return (x >= -0.5 && x <= 1.0) ? log1p_series(x) : log(1.0 + x);
}

// e^x - 1: a Taylor polynomial to x^8/8! below ln2/2 (truncated below 2^-30 of the
// result), where exp(x) - 1 would cancel; exp(x) - 1 above.
float expm1_f(float x) {
    if (abs(x) >= 0.34657359) return exp(x) - 1.0;
    float p = 1.0 / 40320.0;
    p = p * x + 1.0 / 5040.0;
    p = p * x + 1.0 / 720.0;
    p = p * x + 1.0 / 120.0;
    p = p * x + 1.0 / 24.0;
    p = p * x + 1.0 / 6.0;
    p = p * x + 0.5;
    return x + x * (x * p);
}

// 1/sqrt(x) with IEEE's special cases (GLSL leaves inversesqrt undefined at x <= 0).
float rsqrt_f(float x) {
    if (x > 0.0) return isinf(x) ? 0.0 : inversesqrt(x);
    return x == 0.0 ? 1.0 / x : f_nan();
}

// (t, 1 - t) for t = tanh(softplus(x)) = n / (n + 2), n = e^x (e^x + 2), written in e^-x
// above 0: no overflow, and 1 - t without cancellation. The twin of cpu/unary.py's.
vec2 mish_parts(float x) {
    if (x > 0.0) {
        float e = exp(-x), e2 = 2.0 * e * e, n = 1.0 + 2.0 * e, d = n + e2;
        return vec2(n / d, e2 / d);
    }
    float e = exp(x), n = e * (e + 2.0), d = n + 2.0;
    return vec2(n / d, 2.0 / d);
}

// x / (1 + |x|), and +-1 past |x| = 1e8, where the quotient rounds to it: Vulkan bounds no
// division by more than 2^126 (NVIDIA's gives 0 there). inf / inf is NaN, as in PyTorch.
float softsign_f(float x) {
    if (abs(x) > 1e8) return isinf(x) ? f_nan() : (x > 0.0 ? 1.0 : -1.0);
    return x / (1.0 + abs(x));                   // (keeps -0 and NaN)
}

// a (e^(x/a) - 1) for x <= 0; x itself where |x/a| < 1e-8 (the rest is below its last
// bit, and x/a may be a subnormal that a device flushes to 0).
float celu_negative(float x, float a) {
    float t = x / a;
    return abs(t) < 1e-8 ? x : a * expm1_f(t);
}

// min(max(x, lo), hi): hi everywhere when lo > hi, and NaN passes through, as PyTorch's clamp.
float limit(float x, float lo, float hi) {
    float y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

// (sigmoid(x), sigmoid(-x)), each from e = exp(-|x|) <= 1: 1 - sigmoid(x) without the
// cancellation of subtracting it from 1.
vec2 sigmoid_pair(float x) {
    float e = exp(-abs(x)), d = 1.0 + e;
    return x >= 0.0 ? vec2(1.0 / d, e / d) : vec2(e / d, 1.0 / d);
}

#include "trig.glsl"
#include "quotient.glsl"

float forward(float x, float a, float b) {
    if (OP == NEG) return -x;
    if (OP == EXP) return exp(x);
    if (OP == LOG) return log(x);
    if (OP == SQRT) return sqrt(x);
    if (OP == ABS) return abs(x);
    if (OP == RELU) return x <= 0.0 ? 0.0 : x;
    if (OP == GELU) return x * normal_cdf(x);
    if (OP == SIGMOID) return sigmoid_f(x);
    if (OP == TANH) return tanh_f(x);
    if (OP == ADD_SCALAR) return x + a;
    if (OP == MUL_SCALAR) return x * a;
    if (OP == DIV_SCALAR) return quotient(x, a);
    if (OP == RSUB_SCALAR) return a - x;
    if (OP == RDIV_SCALAR) return quotient(a, x);
    if (OP == POW_SCALAR) return pow_c(x, a);
    if (OP == RPOW_SCALAR) return pow_c(a, x);
    if (OP == SILU) return x * sigmoid_f(x);
    if (OP == SOFTPLUS)
        return x > SOFTPLUS_THRESHOLD ? x : (x > 0.0 ? x : 0.0) + log1p_series(exp(-abs(x)));
    if (OP == SQUARE) return x * x;
    // (GLSL's sign keeps -0 and NaN; a select of -1 or 0 may be folded into a negation, -0)
    if (OP == SIGN) return float(x > 0.0) - float(x < 0.0);
    if (OP == FLOOR) return floor(x);
    if (OP == CEIL) return ceil(x);
    if (OP == ROUND) return roundEven(x);
    if (OP == TRUNC) return trunc(x);
    if (OP == RECIPROCAL) return 1.0 / x;
    if (OP == RSQRT) return rsqrt_f(x);
    if (OP == EXP2) return exp2(x);
    if (OP == EXPM1) return expm1_f(x);
    if (OP == LOG2) return log2(x);
    if (OP == LOG10) return log2(x) * LOG10_2;
    if (OP == LOG1P) return log1p_f(x);
    if (OP == LEAKY_RELU) return x > 0.0 ? x : x * a;
    if (OP == ELU) return x > 0.0 ? x : a * expm1_f(x);
    if (OP == SELU) return x > 0.0 ? SELU_SCALE * x : (SELU_SCALE * SELU_ALPHA) * expm1_f(x);
    if (OP == CELU) return x > 0.0 ? x : celu_negative(x, a);
    if (OP == HARDSIGMOID) return limit(x + 3.0, 0.0, 6.0) / 6.0;
    if (OP == HARDSWISH) return x * (limit(x + 3.0, 0.0, 6.0) / 6.0);  // (x from 3 on)
    if (OP == SOFTSIGN) return softsign_f(x);
    if (OP == LOGSIGMOID) return (x < 0.0 ? x : 0.0) - log1p_series(exp(-abs(x)));
    if (OP == MISH) return x * mish_parts(x).x;
    if (OP == GELU_TANH) return x * sigmoid_f(GELU_2K * (x + GELU_C * x * x * x));
    if (OP == SIN) return sin_f(x);
    if (OP == COS) return cos_f(x);
    if (OP == TAN) return tan_f(x);
    if (OP == ASIN) return asin_f(x);
    if (OP == ACOS) return acos_f(x);
    if (OP == ATAN) return atan_f(x);
    if (OP == SINH) return sinh_f(x);
    if (OP == COSH) return cosh_f(x);
    if (OP == ASINH) return asinh_f(x);
    if (OP == ACOSH) return acosh_f(x);
    if (OP == ATANH) return atanh_f(x);
    if (OP == ERF) return erf_f(x);
    if (OP == ERFC) return erfc_f(x);
    if (OP == MAXIMUM_SCALAR) return (x > a || isnan(x)) ? x : a;   // NaN from either side
    if (OP == MINIMUM_SCALAR) return (x < a || isnan(x)) ? x : a;
    return limit(x, a, b);                       // CLAMP, HARDTANH; NaN passes through
}

float backward(float x, float y, float g, float a, float b) {
    if (OP == NEG) return -g;
    if (OP == EXP) return g * y;
    if (OP == LOG) return g / x;
    if (OP == SQRT) return g / (2.0 * y);
    if (OP == ABS) return g * sign(x);
    if (OP == RELU) return x <= 0.0 ? 0.0 : g;     // (NaN: the gradient, as PyTorch's)
    if (OP == GELU) return g * (normal_cdf(x) + x * normal_pdf(x));
    if (OP == SIGMOID) return g * y * (1.0 - y);
    if (OP == TANH) return g * (1.0 - y * y);
    if (OP == ADD_SCALAR) return g;
    if (OP == MUL_SCALAR) return g * a;
    if (OP == DIV_SCALAR) return quotient(g, a);
    if (OP == RSUB_SCALAR) return -g;
    if (OP == RDIV_SCALAR) return -quotient(g * a, x * x);
    if (OP == POW_SCALAR) return a == 0.0 ? 0.0 : g * a * pow_c(x, a - 1.0);
    if (OP == RPOW_SCALAR) return (a == 0.0 && x >= 0.0) ? 0.0 : g * y * log(a);
    if (OP == SILU) {
        vec2 s = sigmoid_pair(x);
        return g * s.x * (1.0 + x * s.y);
    }
    if (OP == SOFTPLUS) return x > SOFTPLUS_THRESHOLD ? g : g * sigmoid_f(x);
    if (OP == SQUARE) return (x * g) * 2.0;      // (2x would overflow first)
    if (OP == SIGN || OP == FLOOR || OP == CEIL || OP == ROUND || OP == TRUNC) return 0.0;
    if (OP == HARDTANH) return (x <= a || x >= b) ? 0.0 : g;   // NaN lets g through
    if (OP == RECIPROCAL) return -(g * y) * y;
    if (OP == RSQRT) return -0.5 * g * y * y * y;
    if (OP == EXP2) return g * (y * LN2);
    if (OP == EXPM1) return g * exp(x);         // (not y + 1: it cancels where y ~ -1)
    if (OP == LOG2) return g / x * LOG2E;
    // (log10(e) < 1 is applied first: g / x alone may overflow where the result does not)
    if (OP == LOG10) return (g * LOG10E) / x;
    if (OP == LOG1P) return g / (1.0 + x);
    if (OP == LEAKY_RELU) return x > 0.0 ? g : g * a;
    if (OP == ELU) return x <= 0.0 ? g * a * exp(x) : g;           // NaN lets g through
    if (OP == SELU) return x <= 0.0 ? g * (SELU_SCALE * SELU_ALPHA) * exp(x) : g * SELU_SCALE;
    if (OP == CELU) return x <= 0.0 ? g * exp(x / a) : g;
    if (OP == HARDSIGMOID) return (x > -3.0 && x < 3.0) ? g / 6.0 : 0.0;
    // PyTorch's x/3 + 1/2 as (2x + 3)/6: 2x + 3 is exact near its zero (x near -1.5)
    if (OP == HARDSWISH) return x <= -3.0 ? 0.0 : (x < 3.0 ? g * ((2.0 * x + 3.0) / 6.0) : g);
    if (OP == SOFTSIGN) {
        float d = 1.0 + abs(x);
        return g / d / d;                        // (d^2 would overflow first)
    }
    if (OP == LOGSIGMOID) return g * sigmoid_pair(x).y;
    if (OP == MISH) {                            // t + x sigmoid(x) (1 - t^2)
        vec2 t = mish_parts(x);
        return g * (t.x + x * sigmoid_f(x) * (t.y * (1.0 + t.x)));
    }
    if (OP == GELU_TANH) {                       // s + x s (1 - s) u', u = 2k (x + c x^3)
        float u = GELU_2K * (x + GELU_C * x * x * x);
        vec2 s = sigmoid_pair(u);
        // (x^2 capped: where it would overflow, s (1 - s) is 0 and must not meet inf)
        float du = GELU_2K * (1.0 + 3.0 * GELU_C * min(x * x, 1e30));
        return g * (s.x + x * s.x * s.y * du);
    }
    if (OP == SIN) return g * cos_f(x);
    if (OP == COS) return -g * sin_f(x);
    if (OP == TAN) return g * (1.0 + y * y);     // from the result, as PyTorch's
    // (1 - x)(1 + x), not 1 - x^2, which cancels as |x| -> 1
    if (OP == ASIN) return g / sqrt_acc((1.0 - x) * (1.0 + x));
    if (OP == ACOS) return -g / sqrt_acc((1.0 - x) * (1.0 + x));
    if (OP == ATAN) return g / (1.0 + x * x);
    // g cosh(x), g sinh(x): past 88, where 1/(4e) is below e's last bit, g e^|x|/2 formed
    // so that nothing overflows before the result does (nor makes 0 * inf of g = 0)
    if (OP == SINH) return abs(x) < 88.0 ? g * cosh_f(x) : g_half_exp_abs(g, x);
    if (OP == COSH) {
        if (abs(x) < 88.0) return g * sinh_f(x);
        float v = g_half_exp_abs(g, x);
        return signbit_f(x) ? -v : v;
    }
    // (past 1e18, where x^2 + 1 is x^2 or overflows, g / |x| as (g / s) / s with s = sqrt|x|:
    // Vulkan bounds no division by more than 2^126)
    if (OP == ASINH) {
        float ax = abs(x), s = sqrt_acc(ax);
        return ax > 1e18 ? (g / s) / s : g / sqrt_acc(1.0 + x * x);
    }
    // PyTorch's 1/sqrt(x^2 - 1): finite below -1 too, NaN between -1 and 1
    if (OP == ACOSH)
        return (x > -1.0 && x < 1.0) ? f_nan()
                                     : (g / sqrt_acc(abs(x - 1.0))) / sqrt_acc(abs(x + 1.0));
    if (OP == ATANH) return g / ((1.0 - x) * (1.0 + x));
    if (OP == ERF) return erf_slope(x, g);
    if (OP == ERFC) return erf_slope(x, -g);
    // ties: half; NaN: all of it (neither side is below the other), as PyTorch's
    if (OP == MAXIMUM_SCALAR) return x == a ? 0.5 * g : (x < a ? 0.0 : g);
    if (OP == MINIMUM_SCALAR) return x == a ? 0.5 * g : (x > a ? 0.0 : g);
    return (x >= a && x <= b) ? g : 0.0;         // CLAMP
}

void apply(uint i) {
    if (BACKWARD == 0)
        p.out_.v[i] = forward(p.x.v[i], p.a, p.b);
    else
        p.out_.v[i] = backward(p.x.v[i], p.y.v[i], p.g.v[i], p.a, p.b);
}

#include "pairs16.glsl"

// A word (two elements) a thread; an odd n's last word has a high half past the end,
// which the storage owns (computed on, written as whatever it gives).
void main16() {
    uint stride = gl_NumWorkGroups.x * WG, words = (p.n + 1u) / 2u;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
        vec2 x = widened(uint(Ints(p.x).v[w])), r;
        if (BACKWARD == 0) {
            r = vec2(forward(x.x, p.a, p.b), forward(x.y, p.a, p.b));
        } else {
            vec2 y = widened(uint(Ints(p.y).v[w])), g = widened(uint(Ints(p.g).v[w]));
            r = vec2(backward(x.x, y.x, g.x, p.a, p.b), backward(x.y, y.y, g.y, p.a, p.b));
        }
        Ints(p.out_).v[w] = int(narrowed(r));
    }
}

// Four elements a thread through 16-byte loads and stores (one float a thread leaves the
// memory system idle between requests), then the n % 4 left over one by one.
void main() {
    if (LOW != 0u) {
        main16();
        return;
    }
    uint stride = gl_NumWorkGroups.x * WG, quads = p.n / 4;
    for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
        vec4 x = Quads(p.x).v[q], r;
        if (BACKWARD == 0) {
            [[unroll]] for (uint c = 0; c < 4; ++c) r[c] = forward(x[c], p.a, p.b);
        } else {
            vec4 y = Quads(p.y).v[q], g = Quads(p.g).v[q];
            [[unroll]] for (uint c = 0; c < 4; ++c) r[c] = backward(x[c], y[c], g[c], p.a, p.b);
        }
        Quads(p.out_).v[q] = r;
    }
    uint i = quads * 4 + gl_GlobalInvocationID.x;
    if (i < p.n) apply(i);
}
