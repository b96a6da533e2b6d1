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

// Eight consecutive values of the k-major operand, split, into word w of each plane.
void store_split(uint operand, Words pieces, uint plane, uint w, float v[8]) {
    uvec4 words[3];
    split8(v, words);
    [[unroll]] for (uint q = 0; q < PIECES; ++q) pieces.v[q * (plane / 8) + w] = words[q];
}

#include "split_walk.glsl"

void main() {
    uint g = gl_WorkGroupID.x;
    if (g < p.n0)
        split(0u, p.x0, p.pieces0, p.R0, p.K0, p.plane0, TRANSPOSE_0 != 0, (ROUND16 & 4u) != 0u,
              g, p.n0);
    else
        split(1u, p.x1, p.pieces1, p.R1, p.K1, p.plane1, TRANSPOSE_1 != 0, (ROUND16 & 8u) != 0u,
              g - p.n0, p.n1);
}
