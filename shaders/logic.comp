#version 460
// Ops with boolean results, stored a byte each (dualgrad/kernel_ops.py's LOGIC): x op y
// with NumPy broadcasting up to 4-D, or a test of x; the twin of dualgrad/cpu/logic.py.
// TYPE 0: float operands (IEEE comparisons: NaN is unordered, only != holds); TYPE 1: int32
// operands; TYPE 2: bool operands (bytes, bytes.glsl); logical ops take nonzero as true.
// Floats are compared by their bits (an integer key in the floats' order), so a device that
// flushes subnormals still tells them from 0. Strides are in elements, 0 along broadcast
// axes; FLAT = 1 when both operands have the output's shape (four elements a thread: one
// 16-byte load of each operand, one word of results).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "bytes.glsl"
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

uint apply(int a, int b) {
    bool r;
    if (TYPE == 0u) r = OP >= ISNAN ? test(a) : compare_f(a, b);
    else r = compare_i(a, b);
    return r ? 1u : 0u;
}

const bool UNARY = OP >= ISNAN;

// Operand element i (of a view starting at byte ``lead`` of w, for bools).
int operand(Ints r, Words w, uint lead, uint i) {
    return TYPE == 2u ? int(byte_at(w, lead, i)) : r.v[i];
}

// Four operand elements from 4q on, of an operand that starts a word.
ivec4 quad(Ints r, uint q) {
    if (TYPE == 2u) return ivec4((uvec4(Words(r).v[q]) >> uvec4(0u, 8u, 16u, 24u)) & 0xffu);
    return IntQuads(r).v[q];
}

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    if (FLAT != 0u) {                   // (every view starts its allocation: a word)
        uint quads = p.n / 4u;
        for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
            ivec4 a = quad(p.x, q), b = UNARY ? a : quad(p.y, q);
            Words(p.out0).v[q] = apply(a.x, b.x) | apply(a.y, b.y) << 8 |
                                 apply(a.z, b.z) << 16 | apply(a.w, b.w) << 24;
        }
        if (gl_GlobalInvocationID.x == 0u && quads * 4u < p.n) {      // the last word
            uint word = 0u;
            for (uint i = quads * 4u; i < p.n; ++i) {
                int a = operand(p.x, Words(p.x), 0u, i);
                word |= apply(a, UNARY ? a : operand(p.y, Words(p.y), 0u, i)) << ((i & 3u) << 3);
            }
            Words(p.out0).v[quads] = word;
        }
        return;
    }
    Words wx = word_of(p.x), wy = word_of(p.y), out_words = word_of(p.out0);
    uint lx = lead_of(p.x), ly = lead_of(p.y), lead = lead_of(p.out0);
    // Output word q holds elements 4q - lead ... 4q + 3 - lead of this part; the bytes of
    // the first and last words outside it (another part's) are kept.
    uint words = (lead + p.n + 3u) / 4u;
    for (uint q = gl_GlobalInvocationID.x; q < words; q += stride) {
        uint word = 0u, kept = 0u;
        for (uint k = 0u; k < 4u; ++k) {
            uint i = q * 4u + k - lead;            // (wraps past n below the part's start)
            if (q * 4u + k < lead || i >= p.n) {
                kept |= 0xffu << (k << 3);
                continue;
            }
            uint rem = i, ix = 0u, iy = 0u;
            for (int d = 3; d >= 0; --d) {
                uint c = rem % p.shape[d];
                rem /= p.shape[d];
                ix += c * p.sx[d];
                iy += c * p.sy[d];
            }
            int a = operand(p.x, wx, lx, ix);
            word |= apply(a, UNARY ? a : operand(p.y, wy, ly, iy)) << (k << 3);
        }
        if (kept != 0u) word |= out_words.v[q] & kept;
        out_words.v[q] = word;
    }
}
