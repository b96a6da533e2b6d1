#version 460
// Elementwise y = op(x) and its backward dx = op'(x, y) * g; the twin of
// dualgrad/cpu/unary.py (its forward and backward rules). OP is a specialization
// constant, BACKWARD selects the gradient kernel.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint BACKWARD = 0;

layout(push_constant) uniform Push {
    Floats x; Floats y; Floats g; Floats out_;
    uint n; float a; float b;
} p;

const float SOFTPLUS_THRESHOLD = 20.0;     // PyTorch's default: softplus(x) is x above it

// log(1 + e) for e in [0, 1] as 2 atanh(s), s = e / (2 + e) <= 1/3, by its odd series to
// s^17 (truncated below 2^-29 of the result): only + - * and one division, so no log's
// absolute error where the result is small.
float log1p_unit(float e) {
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

// (sigmoid(x), sigmoid(-x)), each from e = exp(-|x|) <= 1: 1 - sigmoid(x) without the
// cancellation of subtracting it from 1.
vec2 sigmoid_pair(float x) {
    float e = exp(-abs(x)), d = 1.0 + e;
    return x >= 0.0 ? vec2(1.0 / d, e / d) : vec2(e / d, 1.0 / d);
}

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
    if (OP == DIV_SCALAR) return x / a;
    if (OP == RSUB_SCALAR) return a - x;
    if (OP == RDIV_SCALAR) return a / x;
    if (OP == POW_SCALAR) return pow_c(x, a);
    if (OP == RPOW_SCALAR) return pow_c(a, x);
    if (OP == SILU) return x * sigmoid_f(x);
    if (OP == SOFTPLUS)
        return x > SOFTPLUS_THRESHOLD ? x : (x > 0.0 ? x : 0.0) + log1p_unit(exp(-abs(x)));
    if (OP == SQUARE) return x * x;
    // (GLSL's sign keeps -0 and NaN; a select of -1 or 0 may be folded into a negation, -0)
    if (OP == SIGN) return float(x > 0.0) - float(x < 0.0);
    if (OP == FLOOR) return floor(x);
    if (OP == CEIL) return ceil(x);
    if (OP == ROUND) return roundEven(x);
    if (OP == TRUNC) return trunc(x);
    return x < a ? a : (x > b ? b : x);          // CLAMP, HARDTANH; NaN passes through
}

float backward(float x, float y, float g, float a, float b) {
    if (OP == NEG) return -g;
    if (OP == EXP) return g * y;
    if (OP == LOG) return g / x;
    if (OP == SQRT) return g / (2.0 * y);
    if (OP == ABS) return g * sign(x);
    if (OP == RELU) return x > 0.0 ? g : 0.0;
    if (OP == GELU) return g * (normal_cdf(x) + x * normal_pdf(x));
    if (OP == SIGMOID) return g * y * (1.0 - y);
    if (OP == TANH) return g * (1.0 - y * y);
    if (OP == ADD_SCALAR) return g;
    if (OP == MUL_SCALAR) return g * a;
    if (OP == DIV_SCALAR) return g / a;
    if (OP == RSUB_SCALAR) return -g;
    if (OP == RDIV_SCALAR) return -g * a / (x * x);
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
    return (x >= a && x <= b) ? g : 0.0;         // CLAMP
}

void apply(uint i) {
    if (BACKWARD == 0)
        p.out_.v[i] = forward(p.x.v[i], p.a, p.b);
    else
        p.out_.v[i] = backward(p.x.v[i], p.y.v[i], p.g.v[i], p.a, p.b);
}

// Four elements a thread through 16-byte loads and stores (one float a thread leaves the
// memory system idle between requests), then the n % 4 left over one by one.
void main() {
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
