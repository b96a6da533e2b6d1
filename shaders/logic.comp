#version 460
// Ops with boolean results, stored as int32 0 or 1 (dualgrad/kernel_ops.py's LOGIC): x op y
// with NumPy broadcasting up to 4-D, or a test of x; the twin of dualgrad/cpu/logic.py.
// TYPE 0: float operands (IEEE comparisons: NaN is unordered, only != holds); TYPE 1: int32
// operands (logical ops: nonzero is true). Strides are in elements, 0 along broadcast axes;
// FLAT = 1 when both operands have the output's shape.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TYPE = 0;
layout(constant_id = 2) const uint FLAT = 0;

layout(push_constant) uniform Push {
    Ints x; Ints y; Ints out0;
    uint n; uint shape[4]; uint sx[4]; uint sy[4];
} p;

bool test(float a) {
    if (OP == ISNAN) return isnan(a);
    if (OP == ISINF) return isinf(a);
    return !isnan(a) && !isinf(a);                 // ISFINITE
}

bool compare_f(float a, float b) {
    if (isnan(a) || isnan(b)) return OP == NE;     // (spelled out: no compiler may fold it)
    if (OP == EQ) return a == b;
    if (OP == NE) return a != b;
    if (OP == LT) return a < b;
    if (OP == LE) return a <= b;
    if (OP == GT) return a > b;
    return a >= b;                                 // GE
}

bool compare_i(int a, int b) {
    if (OP == EQ) return a == b;
    if (OP == NE) return a != b;
    if (OP == LT) return a < b;
    if (OP == LE) return a <= b;
    if (OP == GT) return a > b;
    if (OP == GE) return a >= b;
    if (OP == LOGICAL_AND) return a != 0 && b != 0;
    if (OP == LOGICAL_OR) return a != 0 || b != 0;
    if (OP == LOGICAL_XOR) return (a != 0) != (b != 0);
    return a == 0;                                 // LOGICAL_NOT
}

bool apply(int a, int b) {
    if (TYPE == 0u) {
        float fa = intBitsToFloat(a);
        return OP >= ISNAN ? test(fa) : compare_f(fa, intBitsToFloat(b));
    }
    return compare_i(a, b);
}

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    bool unary = OP >= ISNAN;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint ix = i, iy = i;
        if (FLAT == 0u) {
            uint rem = i;
            ix = 0u;
            iy = 0u;
            for (int d = 3; d >= 0; --d) {
                uint c = rem % p.shape[d];
                rem /= p.shape[d];
                ix += c * p.sx[d];
                iy += c * p.sy[d];
            }
        }
        p.out0.v[i] = apply(p.x.v[ix], unary ? 0 : p.y.v[iy]) ? 1 : 0;
    }
}
