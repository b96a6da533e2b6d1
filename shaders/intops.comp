#version 460
// Arithmetic of int32 tensors (dualgrad/kernel_ops.py's INTEGER): x op y with NumPy
// broadcasting up to 4-D, or op x; the twin of dualgrad/cpu/intops.py. Two's complement,
// wrapping; floor division and remainder round toward -inf (Python's rule) and give 0 for
// a zero divisor (and INT_MIN // -1 wraps to INT_MIN); powers by repeated squaring,
// wrapping, and those of negative exponents as PyTorch's (1 / a ** -b truncated). FLAT = 1:
// both operands have the output's shape (four elements a thread).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint FLAT = 0;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

layout(push_constant) uniform Push {
    Ints x; Ints y; Ints out0;
    uint n; uint shape[4]; uint sx[4]; uint sy[4];
} p;

int floor_div(int a, int b) {
    if (b == 0) return 0;
    if (b == -1) return -a;                        // (wraps at INT_MIN, as int32 does)
    int q = a / b;                                 // truncated toward zero
    return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// a ** b: the exact power modulo 2^32; for b < 0, 1 / a ** -b truncated (0 but for 1, -1)
int power(int a, int b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) != 0 ? -1 : 1) : 0);
    int result = 1;
    for (uint e = uint(b); e != 0u; e >>= 1) {
        if ((e & 1u) != 0u) result *= a;
        a *= a;
    }
    return result;
}

int apply(int a, int b) {
    if (OP == INT_ADD) return a + b;
    if (OP == INT_SUB) return a - b;
    if (OP == INT_MUL) return a * b;
    if (OP == INT_FLOOR_DIVIDE) return floor_div(a, b);
    if (OP == INT_REMAINDER) return b == 0 ? 0 : a - floor_div(a, b) * b;
    if (OP == INT_MAXIMUM) return max(a, b);
    if (OP == INT_MINIMUM) return min(a, b);
    if (OP == INT_POW) return power(a, b);
    if (OP == INT_NEG) return -a;
    return a < 0 ? -a : a;                         // INT_ABS
}

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    bool unary = OP >= INT_NEG;
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
