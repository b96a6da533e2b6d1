#version 460
// Elementwise x op y with NumPy broadcasting up to 4-D, and its backward (both operands'
// gradients in the broadcast shape); the twin of dualgrad/cpu/binary.py
// (binary_scalar, binary_grad_scalar). Strides are in elements, 0 along broadcast axes;
// FLAT = 1 when both operands have the output's shape (no index arithmetic). LOW 1
// (float16) or 2 (bfloat16), FLAT only: every buffer holds that 16-bit type, two elements
// to a word, widened to float32 and each result rounded to nearest even. MIXED (FLAT,
// forward): one operand stored in LOW's type, widened as it is read, the other and the
// result float32 (PyTorch's promotion: a residual sum of a float32 stream and a 16-bit
// layer output, without a float32 copy of the latter).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "opcodes.glsl"
#include "atan.glsl"
#include "fmod.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint BACKWARD = 0;
layout(constant_id = 2) const uint FLAT = 0;
layout(constant_id = 3) const uint LOW = 0;
layout(constant_id = 4) const uint MIXED = 0;    // 1: y in LOW's type; 2: x

layout(push_constant) uniform Push {
    Floats x; Floats y; Floats g; Floats out0; Floats out1;
    uint n; uint shape[4]; uint sx[4]; uint sy[4];
} p;

#include "pairs16.glsl"
#include "quotient.glsl"

// Element i, and quad q, of an operand: float32, or (`narrow`) LOW's type widened.
float element(Floats f, uint i, bool narrow) {
    if (!narrow) return f.v[i];
    vec2 pair = widened(uint(Ints(f).v[i >> 1]));
    return (i & 1u) != 0u ? pair.y : pair.x;
}

vec4 quad(Floats f, uint q, bool narrow) {
    if (!narrow) return Quads(f).v[q];
    return vec4(widened(uint(Ints(f).v[2u * q])), widened(uint(Ints(f).v[2u * q + 1u])));
}

float forward(float x, float y) {
    if (OP == ADD) return x + y;
    if (OP == SUB) return x - y;
    if (OP == MUL) return x * y;
    if (OP == DIV) return quotient(x, y);
    if (OP == POW) return pow_c(x, y);
    if (OP == MAXIMUM) return (x > y || isnan(x)) ? x : y;
    if (OP == ATAN2) return atan2_f(x, y);
    if (OP == FMOD) return fmod_f(x, y);
    if (OP == REMAINDER) return remainder_f(x, y);
    if (OP == FLOOR_DIVIDE) return integer_quotient(x, y, true);
    return (x < y || isnan(x)) ? x : y;          // MINIMUM
}

vec2 backward(float x, float y, float g) {
    if (OP == ADD) return vec2(g, g);
    if (OP == SUB) return vec2(g, -g);
    if (OP == MUL) return vec2(g * y, g * x);
    if (OP == DIV) return vec2(quotient(g, y), -quotient(g * x, y * y));
    if (OP == POW) {
        float gx = y == 0.0 ? 0.0 : g * y * pow_c(x, y - 1.0);
        float gy = (x == 0.0 && y >= 0.0) ? 0.0 : g * pow_c(x, y) * log(x);
        return vec2(gx, gy);
    }
    if (OP == ATAN2) return atan2_grad(x, y, g);
    if (OP == FMOD) return vec2(g, -times_integer_quotient(g, x, y, false));
    if (OP == REMAINDER) return vec2(g, -times_integer_quotient(g, x, y, true));
    if (OP == FLOOR_DIVIDE) return vec2(0.0);    // (a step function)
    // ties split the gradient; a NaN on either side gives it all to both, as PyTorch's
    if (x == y) return vec2(0.5 * g);
    if (OP == MAXIMUM) return vec2(x < y ? 0.0 : g, x > y ? 0.0 : g);
    return vec2(x > y ? 0.0 : g, x < y ? 0.0 : g);   // MINIMUM
}

void apply(uint i, uint ix, uint iy) {
    if (BACKWARD == 0) {
        p.out0.v[i] = forward(element(p.x, ix, MIXED == 2u), element(p.y, iy, MIXED == 1u));
    } else {
        vec2 d = backward(p.x.v[ix], p.y.v[iy], p.g.v[i]);
        p.out0.v[i] = d.x;
        p.out1.v[i] = d.y;
    }
}

// FLAT: four elements a thread through 16-byte loads and stores, then the n % 4 left over.
void same_shapes() {
    uint stride = gl_NumWorkGroups.x * WG, quads = p.n / 4;
    for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
        vec4 x = quad(p.x, q, MIXED == 2u), y = quad(p.y, q, MIXED == 1u);
        if (BACKWARD == 0) {
            vec4 r;
            [[unroll]] for (uint c = 0; c < 4; ++c) r[c] = forward(x[c], y[c]);
            Quads(p.out0).v[q] = r;
        } else {
            vec4 g = Quads(p.g).v[q], r0, r1;
            [[unroll]] for (uint c = 0; c < 4; ++c) {
                vec2 d = backward(x[c], y[c], g[c]);
                r0[c] = d.x;
                r1[c] = d.y;
            }
            Quads(p.out0).v[q] = r0;
            Quads(p.out1).v[q] = r1;
        }
    }
    uint i = quads * 4 + gl_GlobalInvocationID.x;
    if (i < p.n) apply(i, i, i);
}

// FLAT with LOW: a word (two elements) a thread; an odd n's last word has a high half past
// the end, which the storage owns (computed on, written as whatever it gives).
void same_shapes16() {
    uint stride = gl_NumWorkGroups.x * WG, words = (p.n + 1u) / 2u;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
        vec2 x = widened(uint(Ints(p.x).v[w])), y = widened(uint(Ints(p.y).v[w]));
        if (BACKWARD == 0) {
            Ints(p.out0).v[w] = int(narrowed(vec2(forward(x.x, y.x), forward(x.y, y.y))));
        } else {
            vec2 g = widened(uint(Ints(p.g).v[w]));
            vec2 lo = backward(x.x, y.x, g.x), hi = backward(x.y, y.y, g.y);
            Ints(p.out0).v[w] = int(narrowed(vec2(lo.x, hi.x)));
            Ints(p.out1).v[w] = int(narrowed(vec2(lo.y, hi.y)));
        }
    }
}

void main() {
    if (LOW != 0u && MIXED == 0u) {
        same_shapes16();
        return;
    }
    if (FLAT != 0) {
        same_shapes();
        return;
    }
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint rem = i, ix = 0, iy = 0;
        for (int d = 3; d >= 0; --d) {
            uint c = rem % p.shape[d];
            rem /= p.shape[d];
            ix += c * p.sx[d];
            iy += c * p.sy[d];
        }
        apply(i, ix, iy);
    }
}
