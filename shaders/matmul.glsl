// C = op(A) @ op(B), batched, full float32 (every product and sum is an f32 fma). Operands
// are read through element strides (a_sm, a_sk), (b_sk, b_sn), so a transposed operand is
// read in place; a batch stride of 0 shares a 2-D operand across the batch.
//
// A workgroup computes a BM x BN tile of C, each thread a TM x TN block of it held in
// registers (register tiling: each value read from shared memory feeds TM or TN fmas).
// K is walked in steps of BK through two shared-memory buffers: while the threads multiply
// out one step, they have already fetched the next one from global memory into registers,
// so one barrier per step suffices (double buffering). Tile shapes are specialization
// constants: the backend picks them per problem (big squares, skinny M or N).
//
// Split K: workgroup z = batch * SPLITS + s sums only k in [s * kc, (s + 1) * kc) and writes
// its partial product to slice z of the scratch W (stride c_bs), then counts itself in at
// counters[tile]. The slice that counts last adds the tile's SPLITS partial products, in
// order of s whichever slice that is (so the result does not depend on timing), writes C
// and puts the counter back to 0 for the next dispatch: one dispatch, no second pass.
//
// BIAS: C = op(A) @ op(B) + bias, bias[n] added to every row as C is stored (after split
// K's slices are summed): one float32 addition, as a separate add would make it, without
// the second dispatch (a linear layer's forward).
//
// RELU_C: then every output of C x becomes x <= 0 ? 0 : x, as unary.comp's relu makes it (a
// selection, no arithmetic; NaN stays NaN): a linear layer and its ReLU in one dispatch.
//
// MASK_C: then every output x becomes 0 where mask (a matrix laid out as C) is <= 0, else
// is kept (a NaN mask keeps it), as unary.comp's relu backward makes a gradient from
// relu's output (a selection): the gradient a linear layer hands back to the ReLU below
// it, in one dispatch.
//
// ROWSUM_A: the workgroups of the first column of tiles also write the sums of op(A)'s rows
// (sum over k, in order of k) to `sums`, from the A tiles they load anyway: a linear
// layer's bias gradient beside its weight gradient (op(A) = g^T). Whole K only (SPLITS 1).
//
// Loads come in quads: 4 elements consecutive along the operand's contiguous dimension,
// neighbouring threads taking neighbouring quads (whole 32-byte sectors of a row).
// Where the backend has checked that every quad is 16-byte aligned and lies wholly inside
// or wholly outside the matrix (A_VEC / B_VEC), a quad is one vec4 load; otherwise it is 4
// bounds-checked scalar loads. Out-of-range elements read as 0, so edge tiles are exact.
//
// Whole tiles (WHOLE): a tile inside the matrix, with K in whole steps, needs no bounds
// test on any load or store. WHOLE 1: every tile is whole. WHOLE 2 (matmul_edges.comp, this
// file built with EDGE_TILES): M or N is not a whole number of tiles, so the tiles inside
// take the code without tests and the edge tiles the code with them (the shader holds both;
// main picks one per workgroup). matmul.comp (WHOLE 0 or 1) is built without it: holding
// both made its whole tiles slower. An edge tile also skips the multiply-adds of its
// threads' quads of rows or columns that lie wholly outside C: with one wave of workgroups
// the product takes as long as its slowest tile (docs/performance.md).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "round16.glsl"

// How a function knows its tile is whole: with EDGE_TILES, from its argument `whole` (each
// workgroup's own); without, from WHOLE, the same for every workgroup.
#ifdef EDGE_TILES
#define WHOLE_PARAM , bool whole
#define WHOLE_ARG , whole
#define IS_WHOLE whole
#define NOT_WHOLE !whole
#define VALID(test) (whole ? 4u : (test))
#else
#define WHOLE_PARAM
#define WHOLE_ARG
#define IS_WHOLE WHOLE != 0
#define NOT_WHOLE WHOLE == 0
#define VALID(test) test
#endif

layout(constant_id = 0) const uint BM = 64;     // tile rows
layout(constant_id = 1) const uint BN = 64;     // tile columns
layout(constant_id = 2) const uint BK = 16;     // K step (multiple of 4)
layout(constant_id = 3) const uint TM = 4;      // rows per thread (multiple of 4)
layout(constant_id = 4) const uint TN = 4;      // columns per thread (multiple of 4)
layout(constant_id = 5) const uint A_T = 0;     // 1: A's contiguous dimension is m, else k
layout(constant_id = 6) const uint B_T = 0;     // 1: B's contiguous dimension is k, else n
layout(constant_id = 7) const uint A_VEC = 0;
layout(constant_id = 8) const uint B_VEC = 0;
layout(constant_id = 9) const uint C_VEC = 0;   // N and c_bs multiples of 4: vec4 stores
layout(constant_id = 10) const uint SPLITS = 1;
layout(local_size_x_id = 11) in;                // = (BM / TM) * (BN / TN)
// 1: every tile is whole (M, N, K multiples of BM, BN, BK) and every access a vec4, so no
// load or store needs a bounds test; 2: the tiles inside the matrix are (K and the access
// as for 1), the edge tiles test; 0: every tile tests.
layout(constant_id = 12) const uint WHOLE = 0;
layout(constant_id = 13) const uint BIAS = 0;   // 1: add bias[n] to every output
layout(constant_id = 14) const uint RELU_C = 0; // 1: then relu every output
layout(constant_id = 15) const uint MASK_C = 0; // 1: then zero it where mask <= 0
layout(constant_id = 16) const uint ROWSUM_A = 0;   // 1: and write op(A)'s row sums
layout(constant_id = 17) const uint ROUND16 = 0;    // 1 / 2: operands rounded to float16 /
                                                // bfloat16 as they are loaded (autocast);
// + 4: A stored in that type, + 8: B (two to a word, widened as they are loaded); + 16: C
// stored in it, each output rounded once as it is stored (C_VEC: two words a quad)
const uint LOW16 = ROUND16 & 3u;
const bool A16 = (ROUND16 & 4u) != 0u, B16 = (ROUND16 & 8u) != 0u;
const bool C16 = (ROUND16 & 16u) != 0u;
#include "windows.glsl"     // WINDOWS (constants 18-31): a convolution's windows

// C and W: coherent, so partial products one workgroup stores reach the one that adds them.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Out { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) coherent buffer OutQuads {
    vec4 v[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Counters { uint v[]; };

layout(push_constant) uniform Push {
    Floats a; Floats b; Out c; Out w; Counters counters; Floats bias; Floats mask;
    Floats sums;
    uint M; uint N; uint K; uint a_sm; uint a_sk; uint b_sk; uint b_sn;
    uint a_bs; uint b_bs; uint c_bs; uint kc;
} p;

const uint WX = BN / TN, WY = BM / TM;          // threads along n and along m
const uint THREADS = WX * WY;
const uint LA = BM * BK / 4 / THREADS;          // A quads each thread loads per K step
const uint LB = BK * BN / 4 / THREADS;

// Shared tiles, k-major: As holds A[m][k] at (k, m), Bs holds B[k][n] at (k, n), so the
// inner loop reads both as vec4 rows. Two buffers each for double buffering.
//
// An operand whose contiguous dimension is k is transposed on its way in: a warp's 32
// threads store one element each of 32 / (BK / 4) rows of the tile at BK / 4 values of k.
// Row k's quads are stored XOR-swizzled by swizzle(k), which spreads those stores over all
// 32 banks (unswizzled, the BK / 4 values of k would land in the same banks); the reads XOR
// back, with a constant, since k is unrolled there.
shared vec4 As[2 * BK * BM / 4];
shared vec4 Bs[2 * BK * BN / 4];

// The 16-bit element ``h`` (LOW16's type) widened, exactly.
float widen16(uint h) { return widen16(h, LOW16); }

// Element i of 16-bit storage.
float load16(Floats f, uint i) {
    uint w = uint(Ints(f).v[i >> 1]);
    return widen16((i & 1u) != 0u ? w >> 16 : w & 0xffffu);
}

// A quad at element offset `off` of `f` with elements `step` apart, of which the first
// `valid` (0..4) are inside the matrix; `narrow`: `f` holds 16-bit elements.
vec4 quad(Floats f, uint off, uint step, uint valid, bool vec, bool narrow WHOLE_PARAM) {
    if (narrow) {
        if (vec) {              // (off a multiple of 4: two whole words)
            if (!(IS_WHOLE || valid >= 4)) return vec4(0.0);
            uint w0 = uint(Ints(f).v[off >> 1]), w1 = uint(Ints(f).v[(off >> 1) + 1u]);
            return vec4(widen16(w0 & 0xffffu), widen16(w0 >> 16), widen16(w1 & 0xffffu),
                        widen16(w1 >> 16));
        }
        vec4 q = vec4(0.0);
        [[unroll]] for (uint c = 0; c < 4; ++c)
            if (c < valid) q[c] = load16(f, off + c * step);
        return q;
    }
    if (vec) return IS_WHOLE || valid >= 4 ? Quads(f).v[off >> 2] : vec4(0.0);
    vec4 q = vec4(0.0);
    [[unroll]] for (uint c = 0; c < 4; ++c)
        if (c < valid) q[c] = f.v[off + c * step];
    return q;
}

// The quad swizzle of row k of a tile with `quads` quads per row (a power of two).
uint swizzle(uint k, uint quads) {
    return ((k >> 2) * max(1u, 32u / BK)) & (min(8u, quads) - 1u);
}
uint swizzle_a(uint k) { return A_T == 0 ? swizzle(k, BM / 4) : 0u; }
uint swizzle_b(uint k) { return B_T == 1 ? swizzle(k, BN / 4) : 0u; }

// The e-th A quad of the tile at (m0, k0): A_T 0, quads along k (BK / 4 to a row of the
// tile, k fastest across threads); A_T 1, quads along m (BM / 4 to a value of k).
vec4 load_a(uint e, uint m0, uint k0, uint kend, uint base WHOLE_PARAM) {
    if (WINDOWS == 2) {                         // element m of windows k.. (A_T 0)
        uint m = m0 + e / (BK / 4), k = k0 + (e % (BK / 4)) * 4;
        return window_quad(p.a, 0, m, k, VALID(m < p.M ? valid4(k, kend) : 0u));
    }
    if (A_T == 0) {                             // quads along k, k fastest across threads
        uint m = m0 + e / (BK / 4), k = k0 + (e % (BK / 4)) * 4;
        return quad(p.a, base + m * p.a_sm + k * p.a_sk, p.a_sk,
                    VALID(m < p.M ? valid4(k, kend) : 0u), A_VEC != 0, A16 WHOLE_ARG);
    }
    uint m = m0 + (e % (BM / 4)) * 4, k = k0 + e / (BM / 4);   // quads along m
    return quad(p.a, base + m * p.a_sm + k * p.a_sk, p.a_sm,
                VALID(k < kend ? valid4(m, p.M) : 0u), A_VEC != 0, A16 WHOLE_ARG);
}

// An operand's quad as the product takes it: rounded to ROUND16's type where it says one
// (a 16-bit operand's values are that rounding already).
vec4 rounded16(vec4 q) {
    if (LOW16 == 0u) return q;
    uvec4 u = floatBitsToUint(q);
    [[unroll]] for (uint c = 0; c < 4; ++c)
        u[c] = round16(u[c], LOW16);
    return uintBitsToFloat(u);
}

void store_a(uint e, uint buf, vec4 q) {
    q = rounded16(q);
    if (A_T == 0) {
        uint mm = e / (BK / 4), k = (e % (BK / 4)) * 4, quad = (mm / 4) ^ swizzle_a(k);
        [[unroll]] for (uint c = 0; c < 4; ++c)
            As[(buf * BK + k + c) * (BM / 4) + quad][mm % 4] = q[c];
    } else {
        As[(buf * BK + e / (BM / 4)) * (BM / 4) + e % (BM / 4)] = q;
    }
}

// The e-th B quad of the tile at (k0, n0): B_T 0, quads along n; B_T 1, quads along k.
vec4 load_b(uint e, uint n0, uint k0, uint kend, uint base WHOLE_PARAM) {
    if (WINDOWS == 1) {                         // element k of windows n.. (B_T 0)
        uint n = n0 + (e % (BN / 4)) * 4, k = k0 + e / (BN / 4);
        return window_quad(p.b, base, k, n, VALID(k < kend ? valid4(n, p.N) : 0u));
    }
    if (WINDOWS == 2) {             // g[image][n][l] for k = (image, l).. (B_T 1): a quad
        uint n = n0 + e / (BK / 4), k = k0 + (e % (BK / 4)) * 4;   // of one image where
        uint valid = VALID(n < p.N ? valid4(k, kend) : 0u);         // OL % 4 == 0 (B_VEC)
        if (B_VEC != 0) return quad(p.b, ((k / OL) * p.N + n) * OL + k % OL, 1u, valid,
                                    true, false WHOLE_ARG);
        vec4 q = vec4(0.0);
        [[unroll]] for (uint c = 0; c < 4; ++c)
            if (c < valid) q[c] = p.b.v[(((k + c) / OL) * p.N + n) * OL + (k + c) % OL];
        return q;
    }
    if (B_T == 0) {                             // quads along n
        uint n = n0 + (e % (BN / 4)) * 4, k = k0 + e / (BN / 4);
        return quad(p.b, base + k * p.b_sk + n * p.b_sn, p.b_sn,
                    VALID(k < kend ? valid4(n, p.N) : 0u), B_VEC != 0, B16 WHOLE_ARG);
    }
    uint n = n0 + e / (BK / 4), k = k0 + (e % (BK / 4)) * 4;    // quads along k
    return quad(p.b, base + k * p.b_sk + n * p.b_sn, p.b_sk,
                VALID(n < p.N ? valid4(k, kend) : 0u), B_VEC != 0, B16 WHOLE_ARG);
}

void store_b(uint e, uint buf, vec4 q) {
    q = rounded16(q);
    if (B_T == 0) {
        Bs[(buf * BK + e / (BN / 4)) * (BN / 4) + e % (BN / 4)] = q;
    } else {
        uint nn = e / (BK / 4), k = (e % (BK / 4)) * 4, quad = (nn / 4) ^ swizzle_b(k);
        [[unroll]] for (uint c = 0; c < 4; ++c)
            Bs[(buf * BK + k + c) * (BN / 4) + quad][nn % 4] = q[c];
    }
}

// Output quads: the thread's 4 values at (m, n..n+3), offset `off`; one vec4 access where
// C_VEC, else the ones inside the matrix.
void store(Out dst, uint off, uint n, vec4 v) {
    if (C_VEC != 0) {
        OutQuads(dst).v[off >> 2] = v;
        return;
    }
    [[unroll]] for (uint j = 0; j < 4; ++j)
        if (n + j < p.N) dst.v[off + j] = v[j];
}

// An output quad (off a multiple of 4) rounded into 16-bit storage: two words.
void store16(Out dst, uint off, vec4 v) {
    uvec4 u = floatBitsToUint(v);
    uvec4 h = uvec4(narrow16(u.x, LOW16), narrow16(u.y, LOW16), narrow16(u.z, LOW16),
                    narrow16(u.w, LOW16));
    Ints(dst).v[off >> 1] = int(h.x | (h.y << 16));
    Ints(dst).v[(off >> 1) + 1u] = int(h.z | (h.w << 16));
}

vec4 fetch(Out src, uint off, uint n) {
    if (C_VEC != 0) return OutQuads(src).v[off >> 2];
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0; j < 4; ++j)
        if (n + j < p.N) v[j] = src.v[off + j];
    return v;
}

// The thread's TM x TN accumulators (private, so store_tile sees them), rows and columns as
// main lays them out.
vec4 acc[TM][TN / 4];

// Split K's last slice: each accumulator becomes the sum of the SPLITS slices' values of
// it, added in order of slice (slice `mine`'s from the registers), so the result does not
// depend on which slice came last. The outer loop runs over the fewer of the slices and
// the thread's quads: the loads of one round (the inner loop's) can be in flight together,
// each round waits for the one before (docs/performance.md).
void add_slices(uint batch, uint mine, uint tx, uint ty, uint m0, uint n0 WHOLE_PARAM) {
    const uint QUADS = TM * TN / 4;
    vec4 sum[TM][TN / 4];
    for (uint j = 0; j < (SPLITS <= QUADS ? SPLITS : 1u); ++j)     // slice by slice, or
        [[unroll]] for (uint r = 0; r < TM / 4; ++r)                 // quad by quad
            [[unroll]] for (uint i = 0; i < 4; ++i) {
                uint m = m0 + (ty + r * WY) * 4 + i;
                [[unroll]] for (uint s = 0; s < TN / 4; ++s) {
                    uint n = n0 + (tx + s * WX) * 4, off = m * p.N + n;
                    bool inside = IS_WHOLE || (m < p.M && n < p.N);
                    for (uint jj = 0; jj < (SPLITS <= QUADS ? 1u : SPLITS); ++jj) {
                        uint slice = SPLITS <= QUADS ? j : jj;
                        vec4 part = slice == mine ? acc[r * 4 + i][s] : !inside ? vec4(0.0)
                                  : fetch(p.w, (batch * SPLITS + slice) * p.c_bs + off, n);
                        sum[r * 4 + i][s] = slice == 0 ? part : sum[r * 4 + i][s] + part;
                    }
                }
            }
    [[unroll]] for (uint i = 0; i < TM; ++i)
        [[unroll]] for (uint s = 0; s < TN / 4; ++s) acc[i][s] = sum[i][s];
}

// The bias of columns n..n+3 (0 past N).
vec4 bias_quad(uint n) {
    if (C_VEC != 0) return Quads(p.bias).v[n >> 2];     // N is a multiple of 4
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0; j < 4; ++j)
        if (n + j < p.N) v[j] = p.bias.v[n + j];
    return v;
}

// The mask's quad at C's offset `off` (columns n..n+3; 0 past N).
vec4 mask_quad(uint off, uint n) {
    if (C_VEC != 0) return Quads(p.mask).v[off >> 2];
    vec4 v = vec4(0.0);
    [[unroll]] for (uint j = 0; j < 4; ++j)
        if (n + j < p.N) v[j] = p.mask.v[off + j];
    return v;
}

// The thread's accumulators into the slice of `dst` at `base`; where `final` (the product C,
// not a slice's partial product), plus the bias, then the relu, then the mask.
void store_tile(Out dst, uint base, uint tx, uint ty, uint m0, uint n0,
                bool final WHOLE_PARAM) {
    vec4 bq[TN / 4];
    [[unroll]] for (uint s = 0; s < TN / 4; ++s) {
        uint n = n0 + (tx + s * WX) * 4;
        bq[s] = BIAS != 0 && final && (IS_WHOLE || n < p.N) ? bias_quad(n) : vec4(0.0);
    }
    [[unroll]] for (uint r = 0; r < TM / 4; ++r)
        [[unroll]] for (uint i = 0; i < 4; ++i) {
            uint m = m0 + (ty + r * WY) * 4 + i;
            if (NOT_WHOLE && m >= p.M) continue;
            [[unroll]] for (uint s = 0; s < TN / 4; ++s) {
                uint n = n0 + (tx + s * WX) * 4;
                if (NOT_WHOLE && n >= p.N) continue;
                vec4 v = acc[r * 4 + i][s];
                if (BIAS != 0 && final) v += bq[s];
                if (RELU_C != 0 && final) v = mix(v, vec4(0.0), lessThanEqual(v, vec4(0.0)));
                uint off = base + m * p.N + n;
                if (MASK_C != 0 && final)
                    v = mix(v, vec4(0.0), lessThanEqual(mask_quad(off, n), vec4(0.0)));
                if (C16 && final)
                    store16(dst, off, v);
                else
                    store(dst, off, n, v);
            }
        }
}

// The workgroup's tile of C. With EDGE_TILES, `whole` (no bounds tests: the tile lies
// inside the matrix and K is in whole steps) or not: main calls it once with each
// constant, so the compiler (inlining it) makes the code without tests and the code with.
#ifdef EDGE_TILES
void tile_product(bool whole) {
#else
void main() {
#endif
    // A warp's 32 threads cover lx x ly threads of the WX x WY grid, not one 32-wide row:
    // each K step, its shared-memory reads are then 4 distinct A quads and 8 distinct B
    // quads instead of 1 and 32. Shared memory returns 128 bytes a cycle, so a warp's vec4
    // read takes 4 cycles, or 2 where lanes n and n ^ 1 (or n and n ^ 2) read one address.
    // So lane bit 0 is ty's lowest bit, the bits above it tx, then the rest of ty: lanes
    // n and n ^ 1 share tx (one B quad), n and n ^ 2 share ty (one A quad), and each read
    // takes 2 cycles (8 x 4 a thread: 6 cycles of reads to 8 of fmas, not 8).
    uint lid = gl_LocalInvocationID.x;
    uint lx = min(8u, WX), ly = min(32u / lx, WY);
    uint blk = lid / (lx * ly), lane = lid % (lx * ly);
    uint pair = ly % 2 == 0 ? 1u : 0u, rest = lane >> pair;
    uint tx = (blk % (WX / lx)) * lx + rest % lx;
    uint ty = (blk / (WX / lx)) * ly + (rest / lx << pair) + (lane & pair);
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint z = gl_WorkGroupID.z, batch = z / SPLITS, split = z % SPLITS;
    uint a_base = batch * p.a_bs, b_base = batch * p.b_bs;
    uint kbeg = split * p.kc, kend = min(p.K, kbeg + p.kc);
    uint steps = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

    // Thread (tx, ty) owns rows ty*4 + r*4*WY + (0..3) and columns tx*4 + s*4*WX + (0..3):
    // quads spread over the tile, so a warp's shared-memory reads are broadcasts or
    // consecutive vec4s.
    [[unroll]] for (uint i = 0; i < TM; ++i)
        [[unroll]] for (uint s = 0; s < TN / 4; ++s) acc[i][s] = vec4(0.0);

    // ROWSUM_A: thread lid of a first-column workgroup sums row m0 + lid (THREADS >= BM).
    bool sums_row = ROWSUM_A != 0 && gl_WorkGroupID.x == 0 && lid < BM;
    float rowsum = 0.0;

    vec4 ra[LA], rb[LB];
    if (steps > 0) {
        [[unroll]] for (uint i = 0; i < LA; ++i)
            store_a(lid + i * THREADS, 0,
                    load_a(lid + i * THREADS, m0, kbeg, kend, a_base WHOLE_ARG));
        [[unroll]] for (uint i = 0; i < LB; ++i)
            store_b(lid + i * THREADS, 0,
                    load_b(lid + i * THREADS, n0, kbeg, kend, b_base WHOLE_ARG));
    }
    barrier();
    for (uint t = 0; t < steps; ++t) {
        uint cur = t & 1u;
        bool more = t + 1 < steps;
        if (more) {                             // fetch the next step while this one runs
            uint k0 = kbeg + (t + 1) * BK;
            [[unroll]] for (uint i = 0; i < LA; ++i)
                ra[i] = load_a(lid + i * THREADS, m0, k0, kend, a_base WHOLE_ARG);
            [[unroll]] for (uint i = 0; i < LB; ++i)
                rb[i] = load_b(lid + i * THREADS, n0, k0, kend, b_base WHOLE_ARG);
        }
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
            vec4 av[TM / 4], bv[TN / 4];
            uint row = cur * BK + kk;
            [[unroll]] for (uint r = 0; r < TM / 4; ++r)
                av[r] = As[row * (BM / 4) + ((ty + r * WY) ^ swizzle_a(kk))];
            [[unroll]] for (uint s = 0; s < TN / 4; ++s)
                bv[s] = Bs[row * (BN / 4) + ((tx + s * WX) ^ swizzle_b(kk))];
            [[unroll]] for (uint r = 0; r < TM / 4; ++r)
                [[unroll]] for (uint i = 0; i < 4; ++i)
                    [[unroll]] for (uint s = 0; s < TN / 4; ++s)
#ifdef EDGE_TILES   // (an edge tile: not the threads' quads of rows or columns that lie
                    // wholly outside C; the r-th start at row m0 + r * 4 * WY, the s-th at
                    // column n0 + s * 4 * WX. A whole tile tests nothing here.)
                        if (whole || (m0 + r * 4 * WY < p.M && n0 + s * 4 * WX < p.N))
#endif
                            acc[r * 4 + i][s] = fma(vec4(av[r][i]), bv[s], acc[r * 4 + i][s]);
        }
        if (sums_row)       // row lid of this step's A tile, from the buffer just read
            [[unroll]] for (uint kk = 0; kk < BK; ++kk)
                rowsum += As[(cur * BK + kk) * (BM / 4) + ((lid / 4) ^ swizzle_a(kk))][lid % 4];
        if (more) {
            [[unroll]] for (uint i = 0; i < LA; ++i) store_a(lid + i * THREADS, cur ^ 1u, ra[i]);
            [[unroll]] for (uint i = 0; i < LB; ++i) store_b(lid + i * THREADS, cur ^ 1u, rb[i]);
        }
        barrier();
    }

    if (SPLITS == 1) {
        store_tile(p.c, batch * p.c_bs, tx, ty, m0, n0, true WHOLE_ARG);
        if (sums_row && m0 + lid < p.M) p.sums.v[batch * p.M + m0 + lid] = rowsum;
        return;
    }
    store_tile(p.w, z * p.c_bs, tx, ty, m0, n0, false WHOLE_ARG);
    memoryBarrierBuffer();                      // the partial product, then the count
    barrier();
    uint tile = (batch * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x
                + gl_WorkGroupID.x;
    // The count goes to the others through As, free since the loop's last barrier (a
    // shared flag of its own would take the widest tile past 48 KiB).
    if (lid == 0) As[0].x = uintBitsToFloat(atomicAdd(p.counters.v[tile], 1u));
    barrier();
    if (floatBitsToUint(As[0].x) != SPLITS - 1) return;     // not the last slice
    memoryBarrierBuffer();
    add_slices(batch, split, tx, ty, m0, n0 WHOLE_ARG);
    store_tile(p.c, batch * p.c_bs, tx, ty, m0, n0, true WHOLE_ARG);
    if (lid == 0) p.counters.v[tile] = 0u;
}

#ifdef EDGE_TILES
void main() {
    // (A tile's being whole is the same for all its threads: barriers stay in uniform
    // control flow.)
    if (WHOLE == 1 || (WHOLE == 2 && (gl_WorkGroupID.y + 1) * BM <= p.M
                                   && (gl_WorkGroupID.x + 1) * BN <= p.N))
        tile_product(true);
    else
        tile_product(false);
}
#endif
