#version 460
// A float32 matmul operand scaled and split into the two float16 pieces matmul_f16x3.comp
// multiplies, in two dispatches of this shader over both operands of a product (the grid's
// first workgroups take A, the rest B, as in split_bf16.comp):
//
// MAXIMA 1: the largest finite |x| of each row r of the operand ([batch][r], r: A's m or B's
// n), atomically into `scales` (zeroed before: the bits of non-negative floats order as
// integers do): a workgroup's runs of k combined in shared memory, then one atomic a row.
// MAXIMA 0: each value scaled by its row's 2^s (scale16.glsl) and split, x 2^s = x0 + x1 + e
// with x0 = f16(x 2^s), x1 = f16(x 2^s - x0), rounded to nearest even (round16.glsl's
// to_half, in integer arithmetic): |e| <= 2^-22 |x 2^s| where x1 is a normal float16, else
// at most half its subnormal step, 2^-25; the largest |x 2^s| of a row is below 2^15, so
// neither piece overflows. inf and NaN become x0 = NaN, x1 = 0, so the outputs they feed
// are NaN, and the product computes their tiles again from the float32 operands, as
// matmul_bf16x6.comp does. Pieces as split_bf16.comp's: planes of the operand k-major,
// [batch][k][r], a stored [batch][r][k] one transposed on the way.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "round16.glsl"
#include "scale16.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TRANSPOSE_0 = 0;   // operand 0 is stored [batch][r][k]
layout(constant_id = 1) const uint TRANSPOSE_1 = 0;   // ... operand 1
layout(constant_id = 2) const uint MAXIMA = 0;        // 1: the rows' maxima; 0: the split
const uint LOW16 = 0;                                 // (float32 operands only)

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Words { uvec4 v[]; };

// split_bf16.comp's, then each operand's rows' maxima (float32 bits, [batch][r]).
layout(push_constant) uniform Push {
    Floats x0; Words pieces0; Floats x1; Words pieces1;
    uint R0; uint K0; uint plane0; uint n0;
    uint R1; uint K1; uint plane1; uint n1;
    Ints scales0; Ints scales1;
} p;

// x 2^s, exactly where the result is a normal float (s in [-113, 140]; a value far below its
// row's largest may underflow). A subnormal x is rebuilt from its integer significand, and
// the row's largest below is taken from the bits: a device that flushes subnormal operands
// of float arithmetic to zero would otherwise lose the rows of tiny values.
float scaled(float x, int s) {
    uint u = floatBitsToUint(x);
    if ((u & 0x7f800000u) == 0u) {                       // zero or subnormal: m 2^-149
        int t = s - 149, t1 = max(t, -126);               // (t >= -262: m 2^t1 is normal)
        float y = float(u & 0x7fffffu) * pow2(t1) * pow2(max(t - t1, -126));
        return uintBitsToFloat(floatBitsToUint(y) | (u & 0x80000000u));
    }
    return s <= 127 ? x * pow2(s) : x * pow2(127) * pow2(s - 127);
}

// Eight consecutive values of the k-major operand (one row's 8 consecutive r), scaled and
// split into word w of each of the two planes.
void store_split(uint operand, Words pieces, uint plane, uint w, float v[8]) {
    uint R = operand == 0u ? p.R0 : p.R1, K = operand == 0u ? p.K0 : p.K1;
    Ints scales = operand == 0u ? p.scales0 : p.scales1;
    uint i0 = w * 8, row = (i0 / (K * R)) * R + i0 % R;      // [batch][r] of the first
    uint h[2][4];
    [[unroll]] for (uint i = 0; i < 8; ++i) {
        uint x0 = 0x7e00u, x1 = 0u;
        if (!isinf(v[i]) && !isnan(v[i])) {
            float y = scaled(v[i], scale_exponent(scales.v[row + i]));
            x0 = to_half(floatBitsToUint(y));
            x1 = to_half(floatBitsToUint(y - uintBitsToFloat(from_half(x0))));
        }
        if ((i & 1u) == 0u) { h[0][i / 2] = x0; h[1][i / 2] = x1; }
        else { h[0][i / 2] |= x0 << 16; h[1][i / 2] |= x1 << 16; }
    }
    [[unroll]] for (uint q = 0; q < 2; ++q)
        pieces.v[q * (plane / 8) + w] = uvec4(h[q][0], h[q][1], h[q][2], h[q][3]);
}

#include "split_walk.glsl"

// MAXIMA. Stored k-major, a workgroup takes 256 rows by 8 slices of SLICE values of k: a
// thread reads 8 consecutive rows (one 32-byte read a k, a warp's 32 threads 1 KB together)
// over its slice, the slices' maxima meet by atomics in shared memory, then one atomic a row
// in global memory (a thread's own runs of 64, a global atomic for each row of each run,
// took 1.26-1.33 times as long in an H100's MLP step). Stored [r][k], 32 threads take a run
// of LANE_RUN values of a row, by 16-byte reads where rows start aligned, and the
// workgroup's 8 runs are combined in shared memory. (Shared memory stays at 1 KB: with
// 8 KB, a word a row and slice, both dispatches of this shader took 1.3-1.6 times as long
// on an H100.)
const uint SLICE = 16, LANE_RUN = 32 * 16;          // (kernels/matmul.py's maxima_groups)
shared int run_max[256];

// |x|'s bits, 0 for inf and NaN (integers order as the non-negative floats do).
int finite_abs(float x) {
    int b = floatBitsToInt(x) & 0x7fffffff;
    return b < 0x7f800000 ? b : 0;
}

void maxima(Floats x, Ints scales, uint R, uint K, uint plane, bool transpose, uint g, uint n) {
    uint lid = gl_LocalInvocationID.x, batches = plane / (R * K);
    if (!transpose) {
        uint row_blocks = (R + 255) / 256, slices = (K + 8 * SLICE - 1) / (8 * SLICE);
        uint blocks = batches * row_blocks * slices, slice = lid / 32, r_in = (lid % 32) * 8;
        run_max[lid] = 0;                                  // (each block leaves it so)
        barrier();
        for (uint blk = g; blk < blocks; blk += n) {       // (uniform bounds: barriers)
            uint r0 = (blk % row_blocks) * 256, b = blk / (row_blocks * slices);
            uint k0 = (blk / row_blocks % slices) * 8 * SLICE + slice * SLICE;
            int m[8] = int[8](0, 0, 0, 0, 0, 0, 0, 0);
            if (r0 + r_in < R)
                [[unroll]] for (uint i = 0; i < SLICE; ++i) {
                    uint k = k0 + i;
                    if (k >= K) break;
                    uint q = ((b * K + k) * R + r0 + r_in) / 4;
                    vec4 lo = Quads(x).v[q], hi = Quads(x).v[q + 1];
                    [[unroll]] for (uint j = 0; j < 4; ++j) {
                        m[j] = max(m[j], finite_abs(lo[j]));
                        m[4 + j] = max(m[4 + j], finite_abs(hi[j]));
                    }
                }
            [[unroll]] for (uint j = 0; j < 8; ++j)
                if (m[j] > 0) atomicMax(run_max[r_in + j], m[j]);
            barrier();
            int top = run_max[lid];
            if (top > 0) atomicMax(scales.v[b * R + r0 + lid], top);   // (top: 0 past R)
            run_max[lid] = 0;
            barrier();
        }
        return;
    }
    uint runs = (K + LANE_RUN - 1) / LANE_RUN, blocks = (batches * R * runs + 7) / 8;
    for (uint blk = g; blk < blocks; blk += n) {           // (uniform bounds: barriers)
        uint row = blk * 8 + lid / 32, run = row % runs, br = row / runs;   // br: [b][r]
        int m = 0;
        if (br < batches * R && K % 4 == 0) {                // (a row starts aligned)
            uint q0 = (br * K + run * LANE_RUN) / 4 + lid % 32;
            uint quads = K / 4 - run * LANE_RUN / 4;           // the row's from the run on
            [[unroll]] for (uint i = 0; i < LANE_RUN / 128; ++i)
                if (lid % 32 + 32 * i < quads) {
                    vec4 v = Quads(x).v[q0 + 32 * i];
                    m = max(m, max(max(finite_abs(v.x), finite_abs(v.y)),
                                   max(finite_abs(v.z), finite_abs(v.w))));
                }
        } else if (br < batches * R) {
            for (uint k = run * LANE_RUN + lid % 32; k < min(K, run * LANE_RUN + LANE_RUN);
                 k += 32)
                m = max(m, finite_abs(x.v[br * K + k]));
        }
        run_max[lid] = m;
        barrier();
        if (lid % 32 == 0 && br < batches * R) {
            int top = 0;
            for (uint i = 0; i < 32; ++i) top = max(top, run_max[lid + i]);
            if (top > 0) atomicMax(scales.v[br], top);
        }
        barrier();
    }
}

void main() {
    uint g = gl_WorkGroupID.x;
    bool first = g < p.n0;
    uint n = first ? p.n0 : p.n1;
    g = first ? g : g - p.n0;
    if (MAXIMA != 0) {
        if (first) maxima(p.x0, p.scales0, p.R0, p.K0, p.plane0, TRANSPOSE_0 != 0, g, n);
        else maxima(p.x1, p.scales1, p.R1, p.K1, p.plane1, TRANSPOSE_1 != 0, g, n);
    } else if (first) {
        split(0u, p.x0, p.pieces0, p.R0, p.K0, p.plane0, TRANSPOSE_0 != 0, false, g, n);
    } else {
        split(1u, p.x1, p.pieces1, p.R1, p.K1, p.plane1, TRANSPOSE_1 != 0, false, g, n);
    }
}
