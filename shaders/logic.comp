#version 460
// Ops with boolean results, stored as int32 0 or 1 (dualgrad/kernel_ops.py's LOGIC): x op y
// with NumPy broadcasting up to 4-D, or a test of x; the twin of dualgrad/cpu/logic.py.
// TYPE 0: float operands (IEEE comparisons: NaN is unordered, only != holds); TYPE 1: int32
// operands (logical ops: nonzero is true). Floats are compared by their bits (an integer
// key in the floats' order), so a device that flushes subnormals still tells them from 0.
// Strides are in elements, 0 along broadcast axes; FLAT = 1 when both operands have the
// output's shape (four elements a thread, 16-byte loads).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TYPE = 0;
layout(constant_id = 2) const uint FLAT = 0;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

layout(push_constant) uniform Push {
    Ints x; Ints y; Ints out0;
    uint n; uint shape[4]; uint sx[4]; uint sy[4];
} p;

const int MAGNITUDE = 0x7fffffff, INF_BITS = 0x7f800000;

bool test(int a) {
    int m = a & MAGNITUDE;
    if (OP == ISNAN) return m > INF_BITS;
    if (OP == ISINF) return m == INF_BITS;
    return m < INF_BITS;                           // ISFINITE
}

// The float's order as an int: -0 and +0 both 0, negatives below in reverse magnitude.
int key(int a) { return a < 0 ? -(a & MAGNITUDE) : a; }

bool compare_f(int a, int b) {
    if ((a & MAGNITUDE) > INF_BITS || (b & MAGNITUDE) > INF_BITS) return OP == NE;    // a NaN
    int ka = key(a), kb = key(b);
    if (OP == EQ) return ka == kb;
    if (OP == NE) return ka != kb;
    if (OP == LT) return ka < kb;
    if (OP == LE) return ka <= kb;
    if (OP == GT) return ka > kb;
    return ka >= kb;                               // GE
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

int apply(int a, int b) {
    bool r;
    if (TYPE == 0u) r = OP >= ISNAN ? test(a) : compare_f(a, b);
    else r = compare_i(a, b);
    return r ? 1 : 0;
}

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    bool unary = OP >= ISNAN;
    if (FLAT != 0u) {
        uint quads = p.n / 4u;
        for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
            ivec4 a = IntQuads(p.x).v[q], b = unary ? a : IntQuads(p.y).v[q];
            IntQuads(p.out0).v[q] = ivec4(apply(a.x, b.x), apply(a.y, b.y), apply(a.z, b.z),
                                          apply(a.w, b.w));
        }
        uint i = quads * 4u + gl_GlobalInvocationID.x;
        if (i < p.n) p.out0.v[i] = apply(p.x.v[i], unary ? 0 : p.y.v[i]);
        return;
    }
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint rem = i, ix = 0u, iy = 0u;
        for (int d = 3; d >= 0; --d) {
            uint c = rem % p.shape[d];
            rem /= p.shape[d];
            ix += c * p.sx[d];
            iy += c * p.sy[d];
        }
        p.out0.v[i] = apply(p.x.v[ix], unary ? 0 : p.y.v[iy]);
    }
}
