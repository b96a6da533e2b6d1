// C = op(A) @ op(B) in float32 accuracy on tensor cores (cooperative matrices): the body of
// matmul_bf16x6.comp (bfloat16 pieces) and matmul_f16x3.comp (F16_PIECES 1: float16 ones).
//
// Each float32 operand is split exactly into three bfloat16 pieces, x = x0 + x1 + x2
// (split_bf16.comp: x0 = bf16(x), x1 = bf16(x - x0), rounded to nearest even, and
// x2 = x - x0 - x1: 8 significant bits each; the residuals are exact in float32 and x2 is
// exactly a bfloat16, as it would be with rounding toward zero). Of the nine piece
// products, the six that matter are summed,
// a0b0 + a1b0 + a0b1 + a1b1 + a2b0 + a0b2; the three dropped are below 2^-20 |a b| together.
// Tensor cores multiply bfloat16 exactly and add in float32 with their own rounding, so each
// K step (16 values of k) is summed from zero on the tensor cores and then added, in float32
// with round-to-nearest, to the accumulator: the tensor cores' rounding applies to one
// step's terms only, never to the running sum. The error bound in the tolerance table
// ("matmul") follows from these facts. With PIECES 1 (autocast's product of operands
// rounded to bfloat16) the accumulator itself goes through the tensor cores, as cuBLAS's
// bfloat16 products do: each step adds its 16 products to the running sum there (a
// separate float32 add of each step took a fifth of the kernel's time on an H200); its
// bound is "matmul:autocast".
//
// WINDOWS 1 (a convolution, windows.glsl): B is the windows of the images, read where they
// lie; each thread loads 8 windows' element k, splits them as split_bf16.comp would, and
// stores the pieces' words into the shared tile itself (no B pieces in memory).
//
// The pieces come from split_bf16.comp, one pass per operand: three planes of bfloat16
// values, each operand stored k-major ([k][m] for A, [k][n] for B, transposed there where
// the operand is not), so the rows of a K step's tile are contiguous runs of BM (or BN)
// values in global memory, loaded as 16-byte words (8 values) and stored into shared memory
// as they are, then read from there as 16 x 16 cooperative matrices (A's column-major, B's
// row-major). Each shared row is padded by 16 bytes so the 8 rows a matrix load reads at
// once fall in different banks. (Operands stored with k contiguous, loaded as they are,
// made 32-byte rows of a 16-deep step: 1.5 times slower on an H200.)
//
// Under autocast (ROUND16, as matmul.glsl's): an operand may be stored in 16 bits (the split
// pass and the exact path widen it), and so may C (+ 16): each warp's 16 x 16 blocks then
// pass through 1 KiB of the shared tiles, where each lane takes 8 consecutive outputs of a
// row, adds the bias (BIAS, the fma kernel's bias[n] in one float32 addition), applies the
// relu (RELU_C) and rounds them into one 16-byte word. The bfloat16 pieces' kernel makes
// neither for a float32 C (the backend applies them after, as separate ops); the float16
// pieces' one applies them, and then the mask (MASK_C), as the fma kernel does.
//
// A value the split cannot represent (inf, NaN, |x| >= 2^63, or nonzero |x| < 2^-100)
// reaches the tensor cores as a NaN piece, so every output of its row or column is NaN; a
// workgroup that finds a NaN among its outputs computes its tile again from the float32
// operands with fmas in k order, as matmul.comp computes it (which also settles, in the fma
// kernel's way, any inf - inf an overflow produced). The backend uses this kernel only where
// M and N are multiples of 16 (whole 16 x 16 output blocks) and K >= 256 (plans.py).
//
// F16_PIECES 1 (matmul_f16x3.comp; float32 operands only, PIECES 2, no WINDOWS): two
// float16 pieces of each operand scaled by a power of two per row of op(A) and per column
// of op(B) (split_f16.comp: x s = x0 + x1 + e, |e| <= 2^-22 |x s| + 2^-25, the largest
// |x s| of a row in [2^14, 2^15)), and three of the four piece products, a1b0 + a0b1 +
// a0b0: a1b1 and the e terms are below 3 2^-22 |a b| plus the scaled 2^-25 floors. Two
// pieces a K step and three products where bfloat16 takes three and six: the same bound
// per product, in 0.59-0.77 of cuBLAS float32's time where three bfloat16 pieces took
// 0.86-0.93 (H100 and H200, bench/RESULTS.md). Each warp's outputs pass through shared
// memory, where every lane undoes its row's and columns' scales exactly before it stores
// them.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_bfloat16 : require
#extension GL_KHR_shader_subgroup_vote : require
#ifndef F16_PIECES
#define F16_PIECES 0
#endif
#if F16_PIECES
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#endif
#include "common.glsl"
#include "split3.glsl"
#include "round16.glsl"
#include "windows.glsl"     // WINDOWS 1 (constants 18-31): B is a convolution's windows
// bench/kernel_parts.py builds the kernel without the K loop's global loads (NO_LOADS 1)
// or without its products and shared reads (NO_PRODUCTS 1), to time each part alone.
#ifndef NO_LOADS
#define NO_LOADS 0
#endif
#ifndef NO_PRODUCTS
#define NO_PRODUCTS 0
#endif

layout(constant_id = 0) const uint BM = 128;    // tile rows
layout(constant_id = 1) const uint BN = 64;     // tile columns
layout(constant_id = 2) const uint BK = 16;     // K step (a multiple of 16)
layout(constant_id = 3) const uint WM = 64;     // rows of a warp's share (a multiple of 16)
layout(constant_id = 4) const uint WN = 32;     // its columns (a multiple of 16)
layout(local_size_x_id = 5) in;                 // = (BM / WM) * (BN / WN) * 32
// 3: the float32-accurate product of three pieces; 1: the product of x0 = bf16(x) alone,
// accumulated in float32 (a product under autocast: its inputs rounded to bfloat16, the
// exact path's fmas too)
layout(constant_id = 6) const uint PIECES = 3;
// 1 / 2: the operands rounded to float16 / bfloat16 (PIECES 3 / 1); + 4: A stored in that
// type, + 8: B, + 16: C (matmul.glsl's codes)
layout(constant_id = 7) const uint ROUND16 = 0;
// With C16 or F16_PIECES: add bias[n] to every output, then relu it, then (F16_PIECES)
// zero it where mask (laid out as C) is <= 0: matmul.glsl's BIAS, RELU_C and MASK_C.
layout(constant_id = 8) const uint BIAS = 0;
layout(constant_id = 9) const uint RELU_C = 0;
layout(constant_id = 10) const uint MASK_C = 0;
const uint LOW16 = ROUND16 & 3u;
const bool A16 = (ROUND16 & 4u) != 0u, B16 = (ROUND16 & 8u) != 0u;
const bool C16 = (ROUND16 & 16u) != 0u;

// Groups of 8 bfloat16 values as one 16-byte word.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Words { uvec4 v[]; };

// a, b: the float32 operands (for the exact path), as in matmul.comp; pa, pb: their pieces,
// [piece][batch][k][m or n], with a piece plane's length and a batch's (0: one matrix for
// the whole batch) in bfloat16 values.
layout(push_constant) uniform Push {
    Floats a; Floats b; Floats c; Words pa; Words pb;
    uint M; uint N; uint K; uint a_sm; uint a_sk; uint b_sk; uint b_sn;
    uint a_bs; uint b_bs; uint c_bs;
    uint pa_plane; uint pa_pbs; uint pb_plane; uint pb_pbs;
    Floats bias;                                // (BIAS only)
#if F16_PIECES
    Ints scale_a; Ints scale_b;                 // rows' maxima (split_f16.comp): [batch][m],
                                                // columns': [batch][n]
    Floats mask;                                // (MASK_C only)
#endif
} p;

const uint THREADS = (BM / WM) * (BN / WN) * 32;
const uint GA = BM * BK / 8, GB = BK * BN / 8;  // words of a piece's tile
const uint LA = (PIECES * GA + THREADS - 1) / THREADS; // words of A a thread loads a K step
const uint LB = (PIECES * GB + THREADS - 1) / THREADS;
const uint RM = WM / 16, RN = WN / 16;          // a warp's 16 x 16 blocks

// Shared tiles, k-major: BK rows of BM (A) or BN (B) values, each padded by 8 values
// (16 bytes), in words of 8 values.
const uint A_ROW = (BM + 8) / 8, B_ROW = (BN + 8) / 8;
const uint A_PIECE = BK * A_ROW, B_PIECE = BK * B_ROW;     // words per piece
// One shared array holds both tiles: with several shared variables, NVIDIA's driver (580)
// read cooperative matrices 8 bytes before where ordinary stores put them.
const uint B_AT = PIECES * A_PIECE;
shared uvec4 tiles[B_AT + PIECES * B_PIECE];

#if F16_PIECES
#define Piece float16_t
#else
#define Piece bfloat16_t
#endif
#define FragA coopmat<Piece, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FragB coopmat<Piece, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define Acc coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// x rounded to bfloat16 (nearest even; NaN stays NaN), as split_bf16.comp's x0: the exact
// path's operands under PIECES 1.
float to_bf16_value(float x) {
    uint u = floatBitsToUint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    return uintBitsToFloat((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}

// Element i of an operand as the exact path multiplies it: a 16-bit one (`narrow`)
// widened, a float32 one rounded where the product's operands are.
float operand(Floats f, uint i, bool narrow) {
    if (narrow) {
        uint w = uint(Ints(f).v[i >> 1]), h = (i & 1u) != 0u ? w >> 16 : w & 0xffffu;
        return widen16(h, LOW16);
    }
    float x = f.v[i];
    if (LOW16 == 1u) return uintBitsToFloat(round16(floatBitsToUint(x), LOW16));
    return PIECES == 1 || LOW16 == 2u ? to_bf16_value(x) : x;
}

// Two adjacent outputs of C16 as stored: plus the bias, the relu, rounded into one word.
uint narrow_pair(float x, float y, uint n) {
    if (BIAS != 0) { x += p.bias.v[n]; y += p.bias.v[n + 1]; }
    if (RELU_C != 0) { x = x <= 0.0 ? 0.0 : x; y = y <= 0.0 ? 0.0 : y; }
    uint u = floatBitsToUint(x), v = floatBitsToUint(y);
    return narrow16(u, LOW16) | (narrow16(v, LOW16) << 16);
}

// A float32 output x of column n, at `at` in C, as the epilogue leaves it (the fma kernel's
// operations in its order: the same bits).
float finished(float x, uint n, uint at) {
    if (BIAS != 0) x += p.bias.v[n];
    if (RELU_C != 0) x = x <= 0.0 ? 0.0 : x;
#if F16_PIECES
    if (MASK_C != 0) x = p.mask.v[at] <= 0.0 ? 0.0 : x;
#endif
    return x;
}

#if F16_PIECES
#include "scale16.glsl"

// x / 2^s (s: a row's scale exponent plus a column's, in [-226, 280]) by exact powers of two,
// three factors each a normal float (exact unless the result is subnormal).
float unscaled(float x, int s) {
    int a = clamp(s, -127, 126), b = clamp(s - a, -127, 126);
    return x * pow2(-a) * pow2(-b) * pow2(a + b - s);
}
#endif

// The e-th word of a K step's tile of `rows` x BK values (all three pieces: piece
// e / words, then BK rows of rows / 8 words) at row r0, k0, of pieces in `src` of `extent`
// rows (M or N): its place in the shared tile (`at` + e's offset in the padded rows), and
// the word itself, zero outside the matrix.
uvec4 load_tile(Words src, uint e, uint rows, uint words, uint row_words, uint extent,
                uint r0, uint k0, uint plane, uint base, uint at, out uint slot) {
    uint piece = e / words, g = e % words;
    uint k = k0 + g / (rows / 8), r = r0 + (g % (rows / 8)) * 8;
    slot = at + piece * BK * row_words + (g / (rows / 8)) * row_words + g % (rows / 8);
    if (e >= PIECES * words || k >= p.K || r >= extent) return uvec4(0);
    return src.v[piece * (plane >> 3) + ((base + k * extent + r) >> 3)];   // in words:
                                        // 3 planes of values may pass 2^32
}

uvec4 load_a(uint e, uint m0, uint k0, uint base, out uint slot) {
    return load_tile(p.pa, e, BM, GA, A_ROW, p.M, m0, k0, p.pa_plane, base, 0, slot);
}

uvec4 load_b(uint e, uint n0, uint k0, uint base, out uint slot) {
    return load_tile(p.pb, e, BN, GB, B_ROW, p.N, n0, k0, p.pb_plane, base, B_AT, slot);
}

// Piece `piece` of the A block at tile rows r0.., k = kk..kk+15 (stored [k][m]).
FragA frag_a(uint piece, uint r0, uint kk) {
    FragA f;
    coopMatLoad(f, tiles, piece * A_PIECE + kk * A_ROW + r0 / 8, A_ROW,
                gl_CooperativeMatrixLayoutColumnMajor);
    return f;
}

FragB frag_b(uint piece, uint c0, uint kk) {
    FragB f;
    coopMatLoad(f, tiles, B_AT + piece * B_PIECE + kk * B_ROW + c0 / 8, B_ROW,
                gl_CooperativeMatrixLayoutRowMajor);
    return f;
}

// WINDOWS 1: word g of a K step's B tile (8 windows' element k), split: its pieces' words,
// zero outside the matrix, and its place in the first piece's shared tile.
const uint LW = (GB + THREADS - 1) / THREADS;   // words of windows a thread loads a K step

void load_windows(uint g, uint n0, uint k0, uint base, out uvec4 words[3], out uint slot) {
    uint k = k0 + g / (BN / 8), n = n0 + (g % (BN / 8)) * 8;
    slot = B_AT + (g / (BN / 8)) * B_ROW + g % (BN / 8);
    bool inside = g < GB && k < p.K;
    vec4 lo = window_quad(p.b, base, k, n, inside ? valid4(n, p.N) : 0u);
    vec4 hi = window_quad(p.b, base, k, n + 4, inside ? valid4(n + 4, p.N) : 0u);
    split8(float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w), words);
}

// The words of a K step a thread carries from global to shared memory, and where they go.
uvec4 ra[LA], rb[LB], rw[LW][3];
uint sa[LA], sb[LB], sw[LW];

void fetch(uint m0, uint n0, uint k0, uint pa_base, uint pb_base, uint b_base) {
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < LA; ++i)
        ra[i] = load_a(lid + i * THREADS, m0, k0, pa_base, sa[i]);
    if (WINDOWS == 1) {
        [[unroll]] for (uint i = 0; i < LW; ++i)
            load_windows(lid + i * THREADS, n0, k0, b_base, rw[i], sw[i]);
        return;
    }
    [[unroll]] for (uint i = 0; i < LB; ++i)
        rb[i] = load_b(lid + i * THREADS, n0, k0, pb_base, sb[i]);
}

void stash() {
    uint lid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0; i < LA; ++i)
        if (lid + i * THREADS < PIECES * GA) tiles[sa[i]] = ra[i];
    if (WINDOWS == 1) {
        [[unroll]] for (uint i = 0; i < LW; ++i)
            if (lid + i * THREADS < GB)
                [[unroll]] for (uint q = 0; q < PIECES; ++q) tiles[sw[i] + q * B_PIECE] = rw[i][q];
        return;
    }
    [[unroll]] for (uint i = 0; i < LB; ++i)
        if (lid + i * THREADS < PIECES * GB) tiles[sb[i]] = rb[i];
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

    uint pa_base = batch * p.pa_pbs, pb_base = batch * p.pb_pbs;
    fetch(m0, n0, 0, pa_base, pb_base, b_base);
    stash();
    barrier();
    // The next K step's words are fetched into registers before this step is multiplied
    // out, and stored once every warp is done reading the tiles. (Two stages of tiles, one
    // barrier a step, were 15-45% slower on an H200: bench/RESULTS.md.)
    for (uint t = 0; t < steps; ++t) {
        bool more = t + 1 < steps;
#if !NO_LOADS
        if (more) fetch(m0, n0, (t + 1) * BK, pa_base, pb_base, b_base);
#endif
#if !NO_PRODUCTS
        [[unroll]] for (uint kk = 0; kk < BK; kk += 16) if (PIECES == 1) {
            FragB b0[RN];
            [[unroll]] for (uint j = 0; j < RN; ++j) b0[j] = frag_b(0, wc + 16 * j, kk);
            [[unroll]] for (uint i = 0; i < RM; ++i) {
                FragA a0 = frag_a(0, wr + 16 * i, kk);
                [[unroll]] for (uint j = 0; j < RN; ++j)
                    acc[i][j] = coopMatMulAdd(a0, b0[j], acc[i][j]);
            }
        } else {
#if F16_PIECES
            FragB b0[RN], b1[RN];
            [[unroll]] for (uint j = 0; j < RN; ++j) {
                b0[j] = frag_b(0, wc + 16 * j, kk);
                b1[j] = frag_b(1, wc + 16 * j, kk);
            }
            [[unroll]] for (uint i = 0; i < RM; ++i) {
                FragA a0 = frag_a(0, wr + 16 * i, kk);
                FragA a1 = frag_a(1, wr + 16 * i, kk);
                [[unroll]] for (uint j = 0; j < RN; ++j) {
                    Acc d = coopMatMulAdd(a1, b0[j], Acc(0.0));     // smallest terms first
                    d = coopMatMulAdd(a0, b1[j], d);
                    d = coopMatMulAdd(a0, b0[j], d);
                    acc[i][j] = acc[i][j] + d;
                }
            }
#else
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
#endif
        }
#endif
        barrier();
        if (more) stash();
        barrier();      // unconditional: inside the if, the kernel ran erratically (H200)
    }

    // A NaN output: this tile goes to the exact path (every warp says, in its own word of
    // the tiles, which the last barrier freed).
    bool nan_out = false;
    [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j)
            for (uint e = 0; e < acc[i][j].length(); ++e)
                nan_out = nan_out || isnan(acc[i][j][e]);
    bool warp_nan = subgroupAny(nan_out);
    if (lid % 32 == 0) tiles[warp] = uvec4(warp_nan ? 1u : 0u);
    barrier();
    bool exact = false;
    for (uint w = 0; w < THREADS / 32; ++w) exact = exact || tiles[w].x != 0u;
    uint c_base = batch * p.c_bs;
    if (!exact && C16) {
        barrier();                          // (every thread has read the warps' words)
        uint scratch = warp * 64, lane = lid % 32, row = lane / 2, half8 = (lane % 2) * 8;
        [[unroll]] for (uint i = 0; i < RM; ++i)
            [[unroll]] for (uint j = 0; j < RN; ++j) {
                coopMatStore(acc[i][j], tiles, scratch, 4, gl_CooperativeMatrixLayoutRowMajor);
                controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                               gl_SemanticsAcquireRelease);
                uint m = m0 + wr + 16 * i + row, n = n0 + wc + 16 * j + half8;
                uvec4 lo = tiles[scratch + row * 4 + half8 / 4];
                uvec4 hi = tiles[scratch + row * 4 + half8 / 4 + 1];
                uvec4 w = uvec4(
                    narrow_pair(uintBitsToFloat(lo.x), uintBitsToFloat(lo.y), n),
                    narrow_pair(uintBitsToFloat(lo.z), uintBitsToFloat(lo.w), n + 2),
                    narrow_pair(uintBitsToFloat(hi.x), uintBitsToFloat(hi.y), n + 4),
                    narrow_pair(uintBitsToFloat(hi.z), uintBitsToFloat(hi.w), n + 6));
                if (m < p.M && n < p.N)         // (M and N: multiples of 16, C 16-byte words)
                    Words(p.c).v[(c_base + m * p.N + n) >> 3] = w;
                controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                               gl_SemanticsAcquireRelease);   // (the block is read: free)
            }
        return;
    }
#if F16_PIECES
    if (!exact && PIECES == 2) {            // (the scaled pieces: their scales undone)
        barrier();                          // (every thread has read the warps' words)
        uint scratch = warp * 64, lane = lid % 32, row = lane / 2, half8 = (lane % 2) * 8;
        uint a_at = p.pa_pbs != 0u ? batch * p.M : 0u, b_at = p.pb_pbs != 0u ? batch * p.N : 0u;
        [[unroll]] for (uint i = 0; i < RM; ++i)
            [[unroll]] for (uint j = 0; j < RN; ++j) {
                coopMatStore(acc[i][j], tiles, scratch, 4, gl_CooperativeMatrixLayoutRowMajor);
                controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                               gl_SemanticsAcquireRelease);
                uint m = m0 + wr + 16 * i + row, n = n0 + wc + 16 * j + half8;
                if (m < p.M && n < p.N) {
                    vec4 lo = uintBitsToFloat(tiles[scratch + row * 4 + half8 / 4]);
                    vec4 hi = uintBitsToFloat(tiles[scratch + row * 4 + half8 / 4 + 1]);
                    int sa = scale_exponent(p.scale_a.v[a_at + m]);
                    uint at = c_base + m * p.N + n;              // (16-byte aligned)
                    [[unroll]] for (uint e = 0; e < 4; ++e) {
                        int sb = scale_exponent(p.scale_b.v[b_at + n + e]);
                        int sb4 = scale_exponent(p.scale_b.v[b_at + n + 4 + e]);
                        lo[e] = finished(unscaled(lo[e], sa + sb), n + e, at + e);
                        hi[e] = finished(unscaled(hi[e], sa + sb4), n + 4 + e, at + 4 + e);
                    }
                    Quads(p.c).v[at >> 2] = lo;
                    Quads(p.c).v[(at >> 2) + 1] = hi;
                }
                controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                               gl_SemanticsAcquireRelease);   // (the block is read: free)
            }
        return;
    }
#endif
    if (!exact) {
        [[unroll]] for (uint i = 0; i < RM; ++i)
            [[unroll]] for (uint j = 0; j < RN; ++j) {
                uint m = m0 + wr + 16 * i, n = n0 + wc + 16 * j;
                if (m < p.M && n < p.N)
                    coopMatStore(acc[i][j], p.c.v, c_base + m * p.N + n, p.N,
                                 gl_CooperativeMatrixLayoutRowMajor);
            }
        return;
    }
    // The exact path: float32 fmas in k order, each output alone (two a thread for C16,
    // which stores them as one word).
    if (C16) {
        for (uint e = lid; e < BM * BN / 2; e += THREADS) {
            uint m = m0 + e / (BN / 2), n = n0 + 2 * (e % (BN / 2));
            if (m >= p.M || n >= p.N) continue;
            float s0 = 0.0, s1 = 0.0;
            for (uint k = 0; k < p.K; ++k) {
                float x = operand(p.a, a_base + m * p.a_sm + k * p.a_sk, A16);
                s0 = fma(x, operand(p.b, b_base + k * p.b_sk + n * p.b_sn, B16), s0);
                s1 = fma(x, operand(p.b, b_base + k * p.b_sk + (n + 1) * p.b_sn, B16), s1);
            }
            Ints(p.c).v[(c_base + m * p.N + n) >> 1] = int(narrow_pair(s0, s1, n));
        }
        return;
    }
    for (uint e = lid; e < BM * BN; e += THREADS) {
        uint m = m0 + e / BN, n = n0 + e % BN;
        if (m >= p.M || n >= p.N) continue;
        float s = 0.0;
        for (uint k = 0; k < p.K; ++k) {
            float x = operand(p.a, a_base + m * p.a_sm + k * p.a_sk, A16);
            float y = WINDOWS == 1 ? window_at(p.b, b_base, k, n)
                                   : operand(p.b, b_base + k * p.b_sk + n * p.b_sn, B16);
            if (WINDOWS == 1 && PIECES == 1) y = to_bf16_value(y);
            s = fma(x, y, s);
        }
        p.c.v[c_base + m * p.N + n] = finished(s, n, c_base + m * p.N + n);
    }
}
