#version 460
// C = op(A) @ op(B) in float32 accuracy on bfloat16 tensor cores (cooperative matrices).
//
// Each float32 operand is split exactly into three bfloat16 pieces, x = x0 + x1 + x2
// (x0 = bf16(x), x1 = bf16(x - x0), x2 = bf16(x - x0 - x1): 8 significant bits each; the
// residuals are exact in float32 and x2 is exact in bfloat16, whether the conversion rounds
// to nearest or toward zero). Of the nine piece products, the six that matter are summed,
// a0b0 + a1b0 + a0b1 + a1b1 + a2b0 + a0b2; the three dropped are below 2^-20 |a b| together.
// Tensor cores multiply bfloat16 exactly and add in float32 with their own rounding, so each
// K step (16 values of k) is summed from zero on the tensor cores and then added, in float32
// with round-to-nearest, to the accumulator: the tensor cores' rounding applies to one
// step's terms only, never to the running sum. The error bound in the tolerance table
// ("matmul") follows from these facts.
//
// The operand tiles are loaded from global memory as matmul.comp loads them (quads; see
// matmul_tiles.glsl), split on their way into shared memory, and read from there as
// 16 x 16 cooperative matrices. An operand whose contiguous dimension is k is stored k
// fastest ([row][k]), one whose contiguous dimension is its row is stored [k][row] and read
// column-major, so every store into shared memory is a whole quad; each shared row is padded
// by 16 bytes so the 8 rows a matrix load reads at once fall in different banks.
//
// Inputs the split cannot represent (inf, NaN, |x| >= 2^64, or nonzero |x| < 2^-100, whose
// last piece could be subnormal) mark the workgroup's tile, which is then computed again
// from global memory with float32 fmas in k order, as matmul.comp computes it. The backend
// uses this kernel only where M and N are multiples of 16 (whole 16 x 16 output blocks) and
// K >= 256 (plans.py).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_bfloat16 : require
#include "common.glsl"

layout(constant_id = 0) const uint BM = 128;    // tile rows
layout(constant_id = 1) const uint BN = 64;     // tile columns
layout(constant_id = 2) const uint BK = 16;     // K step (a multiple of 16)
layout(constant_id = 3) const uint WM = 64;     // rows of a warp's share (a multiple of 16)
layout(constant_id = 4) const uint WN = 32;     // its columns (a multiple of 16)
layout(constant_id = 5) const uint A_T = 0;     // as in matmul.comp
layout(constant_id = 6) const uint B_T = 0;
layout(constant_id = 7) const uint A_VEC = 0;
layout(constant_id = 8) const uint B_VEC = 0;
layout(local_size_x_id = 11) in;                // = (BM / WM) * (BN / WN) * 32

#include "matmul_tiles.glsl"

const uint THREADS = (BM / WM) * (BN / WN) * 32;
const uint LA = BM * BK / 4 / THREADS;          // A quads each thread loads per K step
const uint LB = BK * BN / 4 / THREADS;
const uint RM = WM / 16, RN = WN / 16;          // a warp's 16 x 16 blocks

// Shared rows, in quads of bfloat16: k-fastest rows hold BK values, row-fastest rows BM or
// BN; each padded by 8 values (16 bytes).
const uint A_ROW = A_T == 0 ? (BK + 8) / 4 : (BM + 8) / 4;
const uint B_ROW = B_T == 1 ? (BK + 8) / 4 : (BN + 8) / 4;
const uint A_PIECE = A_T == 0 ? BM * A_ROW : BK * A_ROW;   // quads per piece
const uint B_PIECE = B_T == 1 ? BN * B_ROW : BK * B_ROW;
// One shared array holds both tiles and a flag: with several shared variables, NVIDIA's
// driver (580) read cooperative matrices one quad before where ordinary stores put them.
const uint B_AT = 3 * A_PIECE, FLAG = B_AT + 3 * B_PIECE;
shared bf16vec4 tiles[FLAG + 1];

#define FragA coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FragB coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define Acc coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Whether the four values of q split exactly into pieces the tensor cores multiply as they
// are: finite, |x| < 2^64, and 0 or |x| >= 2^-100.
bool splittable(vec4 q) {
    vec4 m = abs(q);
    bvec4 tiny = lessThan(m, vec4(uintBitsToFloat(0x0d800000u)));      // 2^-100
    bvec4 zero = equal(m, vec4(0.0));
    return all(lessThan(m, vec4(uintBitsToFloat(0x5f800000u))))        // 2^64; NaN fails
        && all(bvec4(!tiny.x || zero.x, !tiny.y || zero.y, !tiny.z || zero.z,
                     !tiny.w || zero.w));
}

// Quad q split into its three pieces, stored at quad `at` of a tile's first piece and
// `piece` and 2 `piece` quads on (its other two); whether q was splittable.
bool split_into(uint at, uint piece, vec4 q) {
    bf16vec4 x0 = bf16vec4(q);
    vec4 r = q - vec4(x0);
    bf16vec4 x1 = bf16vec4(r);
    tiles[at] = x0;
    tiles[piece + at] = x1;
    tiles[2 * piece + at] = bf16vec4(r - vec4(x1));
    return splittable(q);
}

// Where the e-th quad of load_a / load_b goes in a piece.
uint a_slot(uint e) {
    uint per_row = A_T == 0 ? BK / 4 : BM / 4;
    return (e / per_row) * A_ROW + e % per_row;
}
uint b_slot(uint e) {
    uint per_row = B_T == 1 ? BK / 4 : BN / 4;
    return (e / per_row) * B_ROW + e % per_row;
}

// Piece `piece` of the A block at tile rows r0.., k = kk..kk+15.
FragA frag_a(uint piece, uint r0, uint kk) {
    FragA f;
    if (A_T == 0)
        coopMatLoad(f, tiles, piece * A_PIECE + r0 * A_ROW + kk / 4, A_ROW,
                    gl_CooperativeMatrixLayoutRowMajor);
    else
        coopMatLoad(f, tiles, piece * A_PIECE + kk * A_ROW + r0 / 4, A_ROW,
                    gl_CooperativeMatrixLayoutColumnMajor);
    return f;
}

FragB frag_b(uint piece, uint c0, uint kk) {
    FragB f;
    if (B_T == 1)
        coopMatLoad(f, tiles, B_AT + piece * B_PIECE + c0 * B_ROW + kk / 4, B_ROW,
                    gl_CooperativeMatrixLayoutColumnMajor);
    else
        coopMatLoad(f, tiles, B_AT + piece * B_PIECE + kk * B_ROW + c0 / 4, B_ROW,
                    gl_CooperativeMatrixLayoutRowMajor);
    return f;
}

void main() {
    uint lid = gl_LocalInvocationID.x, warp = lid / 32;
    uint wr = (warp / (BN / WN)) * WM, wc = (warp % (BN / WN)) * WN;   // the warp's share
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN, batch = gl_WorkGroupID.z;
    uint a_base = batch * p.a_bs, b_base = batch * p.b_bs;
    uint steps = (p.K + BK - 1) / BK;

    Acc acc[RM][RN];
    [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = Acc(0.0);

    bool ok = true;
    vec4 ra[LA], rb[LB];
    if (lid == 0) tiles[FLAG] = bf16vec4(0.0);
    [[unroll]] for (uint i = 0; i < LA; ++i)
        ra[i] = load_a(lid + i * THREADS, m0, 0, p.K, a_base);
    [[unroll]] for (uint i = 0; i < LB; ++i)
        rb[i] = load_b(lid + i * THREADS, n0, 0, p.K, b_base);
    for (uint t = 0; t < steps; ++t) {
        [[unroll]] for (uint i = 0; i < LA; ++i)
            ok = split_into(a_slot(lid + i * THREADS), A_PIECE, ra[i]) && ok;
        [[unroll]] for (uint i = 0; i < LB; ++i)
            ok = split_into(B_AT + b_slot(lid + i * THREADS), B_PIECE, rb[i]) && ok;
        barrier();
        if (t + 1 < steps) {                    // fetch the next step while this one runs
            uint k0 = (t + 1) * BK;
            [[unroll]] for (uint i = 0; i < LA; ++i)
                ra[i] = load_a(lid + i * THREADS, m0, k0, p.K, a_base);
            [[unroll]] for (uint i = 0; i < LB; ++i)
                rb[i] = load_b(lid + i * THREADS, n0, k0, p.K, b_base);
        }
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
            FragB b0[RN], b1[RN], b2[RN];
            [[unroll]] for (uint j = 0; j < RN; ++j) {
                b0[j] = frag_b(0, wc + 16 * j, kk);
                b1[j] = frag_b(1, wc + 16 * j, kk);
                b2[j] = frag_b(2, wc + 16 * j, kk);
            }
            [[unroll]] for (uint i = 0; i < RM; ++i) {
                FragA a0 = frag_a(0, wr + 16 * i, kk);
                FragA a1 = frag_a(1, wr + 16 * i, kk);
                FragA a2 = frag_a(2, wr + 16 * i, kk);
                [[unroll]] for (uint j = 0; j < RN; ++j) {
                    Acc d = coopMatMulAdd(a2, b0[j], Acc(0.0));     // smallest terms first
                    d = coopMatMulAdd(a0, b2[j], d);
                    d = coopMatMulAdd(a1, b1[j], d);
                    d = coopMatMulAdd(a1, b0[j], d);
                    d = coopMatMulAdd(a0, b1[j], d);
                    d = coopMatMulAdd(a0, b0[j], d);
                    acc[i][j] = acc[i][j] + d;
                }
            }
        }
        barrier();                              // the tiles are free for the next step
    }

    if (!ok) tiles[FLAG] = bf16vec4(1.0);
    barrier();
    uint c_base = batch * p.c_bs;
    if (float(tiles[FLAG].x) == 0.0) {
        [[unroll]] for (uint i = 0; i < RM; ++i)
            [[unroll]] for (uint j = 0; j < RN; ++j) {
                uint m = m0 + wr + 16 * i, n = n0 + wc + 16 * j;
                if (m < p.M && n < p.N)
                    coopMatStore(acc[i][j], p.c.v, c_base + m * p.N + n, p.N,
                                 gl_CooperativeMatrixLayoutRowMajor);
            }
        return;
    }
    // The exact path: float32 fmas in k order, each output alone.
    for (uint e = lid; e < BM * BN; e += THREADS) {
        uint m = m0 + e / BN, n = n0 + e % BN;
        if (m >= p.M || n >= p.N) continue;
        float s = 0.0;
        for (uint k = 0; k < p.K; ++k)
            s = fma(p.a.v[a_base + m * p.a_sm + k * p.a_sk],
                    p.b.v[b_base + k * p.b_sk + n * p.b_sn], s);
        p.c.v[c_base + m * p.N + n] = s;
    }
}
