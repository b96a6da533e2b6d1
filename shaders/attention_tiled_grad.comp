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
    for (uint i0 = first; i0 < p.L; i0 += COLS) {
        barrier();
        LOAD_ROWS(ar, p.q, qr, i0, COLS, p.L);
        LOAD_ROWS(br, p.g, orr, i0, COLS, p.L);
        if (gl_LocalInvocationIndex < COLS) {
            uint i = i0 + gl_LocalInvocationIndex;
            lse_s[gl_LocalInvocationIndex] = i < p.L ? p.lse.v[batch * p.L + i] : 0.0;
            delta_s[gl_LocalInvocationIndex] = i < p.L ? p.delta.v[batch * p.L + i] : 0.0;
        }
        barrier();
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
