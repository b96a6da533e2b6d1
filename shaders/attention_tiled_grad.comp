#version 460
// Fused attention's backward for the keys in tiles (rows of 32 or 64; used for 64):
// attention.comp's MODE 2, dv_j = sum_i p_ij g_i and dk_j = sum_i ds_ij q_i, with a
// workgroup of 64 threads taking 32 keys (32 threads and 16 keys where shared memory is
// short) and the queries streaming past 32 at a time (attention_tiles.glsl says how a
// thread's work is laid out). Each weight is recomputed from its row's log-sum-exp, p =
// exp(s - lse), and ds = p (dp - delta) scale, with delta = g_i . o_i from MODE 1 of
// attention.comp, which makes dq (a thread a row: faster there than these tiles, 7.2 ms
// against 10.4 for 4 x 8 causal heads of 4096 x 64 on an H200).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 2) in;        // ROWS / 4 row groups x 8 column groups
layout(constant_id = 0) const uint HEAD = 64;
layout(constant_id = 1) const uint CAUSAL = 0;
layout(constant_id = 2) const uint THREADS = 64;
layout(constant_id = 3) const uint ROWS = 32;     // 32, or 16 where shared memory is short
// 1 / 2: q, k, v, o, g and the gradients stored as float16 / bfloat16 (attention16.glsl)
layout(constant_id = 4) const uint LOW = 0;
#include "attention_tiles.glsl"

shared vec4 xs[ROWS * SROW];           // the workgroup's keys
shared vec4 ys[ROWS * SROW];           // ... and values
shared vec4 ar[COLS * SROW];           // the streamed queries
shared vec4 br[COLS * SROW];           // ... and their output gradients g
shared vec4 wt[COLS * TROW];           // the weights p, transposed: wt[query][keys]
shared vec4 dt[COLS * TROW];           // ds, transposed
shared float lse_s[COLS], delta_s[COLS];   // the streamed queries' lse and delta

// The next tile's queries, their gradients and statistics, loaded into registers while
// this tile is multiplied out, then stored once every read of this tile is done (as
// attention_tiled.comp's keys): the quads of a q and a g tile a thread carries, and (the
// first COLS threads) a query's lse and delta.
const uint CARRIED = (COLS * QROW + THREADS - 1) / THREADS;
vec4 q_next[CARRIED], g_next[CARRIED];
float lse_next, delta_next;

void fetch(Rows qr, Rows orr, uint batch, uint i0) {
    uint lid = gl_LocalInvocationIndex;
    for (uint i = 0; i < CARRIED; ++i) {
        uint e = lid + i * THREADS, r = e / QROW, c = e % QROW;
        bool in_ = e < COLS * QROW && i0 + r < p.L;
        q_next[i] = in_ ? load_quad(p.q, row_at(qr, i0 + r) / 4 + c) : vec4(0.0);
        g_next[i] = in_ ? load_quad(p.g, row_at(orr, i0 + r) / 4 + c) : vec4(0.0);
    }
    bool row = lid < COLS && i0 + lid < p.L;
    lse_next = row ? p.lse.v[batch * p.L + i0 + lid] : 0.0;
    delta_next = row ? p.delta.v[batch * p.L + i0 + lid] : 0.0;
}

void stash() {
    uint lid = gl_LocalInvocationIndex;
    for (uint i = 0; i < CARRIED; ++i) {
        uint e = lid + i * THREADS, r = e / QROW, c = e % QROW;
        if (e < COLS * QROW) {
            ar[r * SROW + c] = q_next[i];
            br[r * SROW + c] = g_next[i];
        }
    }
    if (lid < COLS) {
        lse_s[lid] = lse_next;
        delta_s[lid] = delta_next;
    }
}

void keys(uint tx, uint ty, uint batch, uint key0) {
    Rows qr = rows_of(Q_ROWS, batch), kr = rows_of(K_ROWS, batch);
    Rows orr = rows_of(O_ROWS, batch);
    LOAD_ROWS(xs, p.k, kr, key0, ROWS, p.S);
    LOAD_ROWS(ys, p.v, kr, key0, ROWS, p.S);
    vec4 gk[4][QUADS], gv[4][QUADS];
    for (uint r = 0; r < 4; ++r)
        for (uint e = 0; e < QUADS; ++e) {
            gk[r][e] = vec4(0.0);
            gv[r][e] = vec4(0.0);
        }
    float s[4][4], dp[4][4];
    // queries that may see this workgroup's keys: all, or (causal) from its first key
    uint first = CAUSAL != 0u ? key0 / COLS * COLS : 0u;
    if (first < p.L) {
        fetch(qr, orr, batch, first);
        stash();
    }
    for (uint i0 = first; i0 < p.L; i0 += COLS) {
        barrier();                     // this tile is stored
        if (i0 + COLS < p.L) fetch(qr, orr, batch, i0 + COLS);  // (in flight meanwhile)
        SCORES(s, xs, ar, ty, tx);     // (keys x queries: the transposed scores)
        SCORES(dp, ys, br, ty, tx);
        for (uint c = 0; c < 4; ++c) {
            uint i = i0 + tx + 8u * c;
            vec4 w, ds;
            for (uint r = 0; r < 4; ++r) {
                uint j = key0 + 4u * ty + r;
                bool seen = i < p.L && j < p.S && (CAUSAL == 0u || j <= i);
                w[r] = seen ? exp(s[r][c] * p.scale - lse_s[tx + 8u * c]) : 0.0;
                ds[r] = w[r] * (dp[r][c] - delta_s[tx + 8u * c]) * p.scale;
            }
            wt[(tx + 8u * c) * TROW + ty] = w;
            dt[(tx + 8u * c) * TROW + ty] = ds;
        }
        barrier();
        ACCUMULATE(gv, wt, br, ty, tx);
        ACCUMULATE(gk, dt, ar, ty, tx);
        if (i0 + COLS < p.L) {
            barrier();                 // every read of this tile is done
            stash();
        }
    }
    for (uint r = 0; r < 4; ++r) {
        uint j = key0 + 4u * ty + r;
        if (j >= p.S) break;
        for (uint e = 0; e < QUADS; ++e) {
            uint at = row_at(kr, j) / 4u + tx + 8u * e;
            store_quad(p.dk, at, gk[r][e]);
            store_quad(p.dv, at, gv[r][e]);
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationIndex;
    keys(tid % TX, tid / TX, gl_WorkGroupID.y, gl_WorkGroupID.x * ROWS);
}
