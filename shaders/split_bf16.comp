#version 460
// A float32 matmul operand split into the three bfloat16 pieces matmul_bf16x6.comp
// multiplies: x = x0 + x1 + x2 exactly, with x0 = bf16(x), x1 = bf16(x - x0),
// x2 = x - x0 - x1 (rounded to nearest even; x2 is a bfloat16 as it is). Done once per
// operand here rather than by every workgroup of the product that reads the operand's tiles,
// both operands of a product in one dispatch: the grid's first workgroups take A (operand
// 0), the rest B (operand 1), each walking its own operand as if it were alone.
//
// The pieces are three planes of the operand k-major, [batch][k][r] (r: A's m or B's n, R of
// them, a multiple of 8), so a K step's tile row is one contiguous run. An operand stored
// that way is split as it is (its TRANSPOSE_i is 0); one stored [batch][r][k] is transposed on the
// way, through shared memory, so that both its reads and its writes are coalesced. A value
// the split cannot represent exactly in pieces the tensor cores multiply as they are (inf,
// NaN, |x| >= 2^63, whose first piece may round up to 2^64 and its products overflow, or
// nonzero |x| < 2^-100, whose last piece could be subnormal) is
// written as x0 = NaN, x1 = x2 = 0: every output its row or column feeds comes out NaN,
// which is how the product finds the tiles it computes again with float32 fmas.
//
// An operand may be stored in 16 bits (ROUND16's + 4, + 8): it is widened as it is read,
// exactly, and split the same way. A float32 one is rounded to ROUND16's type as it is read
// where that says one (autocast's float16 products: the exact split of the rounded values).
//
// Integer arithmetic only (no bfloat16 types), so this pass runs on every device.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "round16.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TRANSPOSE_0 = 0;   // operand 0 is stored [batch][r][k]
layout(constant_id = 1) const uint TRANSPOSE_1 = 0;   // ... operand 1
// 3: the exact split; 1: x0 alone, x rounded to bfloat16 (a product under autocast, whose
// inputs are that rounding: matmul_bf16x6.comp then multiplies the one piece)
layout(constant_id = 2) const uint PIECES = 3;
// 1 / 2: float32 operands rounded to float16 / bfloat16 as they are read; + 4: operand 0
// stored in that type, + 8: operand 1 (matmul.glsl's codes)
layout(constant_id = 3) const uint ROUND16 = 0;
const uint LOW16 = ROUND16 & 3u;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Words { uvec4 v[]; };

// Per operand: R, K, its extents; plane, the values in a piece plane (the whole operand);
// n, the workgroups that walk it (a one-dimensional grid: operand 0's, then operand 1's).
layout(push_constant) uniform Push {
    Floats x0; Words pieces0; Floats x1; Words pieces1;
    uint R0; uint K0; uint plane0; uint n0;
    uint R1; uint K1; uint plane1; uint n1;
} p;

#include "split3.glsl"

// A float32 value as the product takes it (rounded to LOW16's type where there is one), or
// a 16-bit one widened.
float taken(float x) {
    return LOW16 == 0u ? x : uintBitsToFloat(round16(floatBitsToUint(x), LOW16));
}

float widened(uint h) { return widen16(h, LOW16); }

// Element i of the operand x (16-bit storage where `narrow`).
float element(Floats x, uint i, bool narrow) {
    if (!narrow) return taken(x.v[i]);
    uint w = uint(Ints(x).v[i >> 1]);
    return widened((i & 1u) != 0u ? w >> 16 : w & 0xffffu);
}

// Eight consecutive values of the k-major operand, split, into word w of each plane.
void store_split(Words pieces, uint plane, uint w, float v[8]) {
    uvec4 words[3];
    split8(v, words);
    [[unroll]] for (uint q = 0; q < PIECES; ++q) pieces.v[q * (plane / 8) + w] = words[q];
}

// TRANSPOSE: a workgroup takes a block of TR values of r by TK of k.
const uint TR = 64, TK = 32;
shared float block[TK][TR + 1];                   // [k][r]; the +1 spreads a column's banks

// One operand, by its workgroup g of the n that walk it: words of 8 values, or blocks of
// TR x TK, in strides of n. (The backend caps n at half the 65535 workgroups a dimension
// every device allows.) The loops' bounds are the same across the workgroup, so its
// barriers stay uniform.
void split(Floats x, Words pieces, uint R, uint K, uint plane, bool transpose, bool narrow,
           uint g, uint n) {
    uint lid = gl_LocalInvocationID.x;
    if (!transpose) {
        for (uint w = g * 256 + lid; w < plane / 8; w += n * 256) {
            float v[8];
            if (narrow) {                                    // 8 values: one 16-byte word
                uvec4 h = Words(x).v[w];
                [[unroll]] for (uint i = 0; i < 4; ++i) {
                    v[2 * i] = widened(h[i] & 0xffffu);
                    v[2 * i + 1] = widened(h[i] >> 16);
                }
            } else {
                vec4 lo = Quads(x).v[2 * w], hi = Quads(x).v[2 * w + 1];
                v = float[8](taken(lo.x), taken(lo.y), taken(lo.z), taken(lo.w),
                             taken(hi.x), taken(hi.y), taken(hi.z), taken(hi.w));
            }
            store_split(pieces, plane, w, v);
        }
        return;
    }
    uint rows = (R + TR - 1) / TR, cols = (K + TK - 1) / TK;   // blocks of r, of k
    uint blocks = rows * cols * (plane / (R * K));
    uint k = lid / (TR / 8), r = (lid % (TR / 8)) * 8;          // what the thread writes
    for (uint blk = g; blk < blocks; blk += n) {
        uint r0 = (blk % rows) * TR, k0 = (blk / rows % cols) * TK, batch = blk / (rows * cols);
        [[unroll]] for (uint i = 0; i < TR * TK / 256; ++i) {       // reads along k
            uint e = lid + i * 256, re = r0 + e / TK, ke = k0 + e % TK;
            block[e % TK][e / TK] = re < R && ke < K ? element(x, (batch * R + re) * K + ke,
                                                               narrow) : 0.0;
        }
        barrier();
        if (k0 + k < K && r0 + r < R) {                              // writes along r
            float v[8];
            [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = block[k][r + i];
            store_split(pieces, plane, ((batch * K + k0 + k) * R + r0 + r) / 8, v);
        }
        barrier();                                                   // block is free again
    }
}

void main() {
    uint g = gl_WorkGroupID.x;
    if (g < p.n0)
        split(p.x0, p.pieces0, p.R0, p.K0, p.plane0, TRANSPOSE_0 != 0, (ROUND16 & 4u) != 0u,
              g, p.n0);
    else
        split(p.x1, p.pieces1, p.R1, p.K1, p.plane1, TRANSPOSE_1 != 0, (ROUND16 & 8u) != 0u,
              g - p.n0, p.n1);
}
