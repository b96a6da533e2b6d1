#version 460
// Fused attention's backward for the queries in tiles (rows of 64): attention.comp's MODE
// 1, dq_i = sum_j ds_ij k_j with ds = p (dp - delta) scale, p = exp(s - lse) recomputed
// from the row's log-sum-exp and delta = g_i . o_i, which it also writes for
// attention_tiled_grad.comp. A workgroup of 128 threads takes 32 query rows (64 threads and
// 16 rows where shared memory is short), the keys and values streaming past 32 at a time
// and loaded a tile ahead (attention_tiles.glsl says how a thread's work is laid out).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 2) in;        // ROWS / 4 row groups x TX column groups
layout(constant_id = 0) const uint HEAD = 64;
layout(constant_id = 1) const uint CAUSAL = 0;
layout(constant_id = 2) const uint THREADS = 128;
layout(constant_id = 3) const uint ROWS = 32;     // 32, or 16 where shared memory is short
// 1 / 2: q, k, v, o, g and the gradients stored as float16 / bfloat16 (attention16.glsl)
layout(constant_id = 4) const uint LOW = 0;
// 1: delta alone (attention_tiled_grad_dq.comp makes dq)
layout(constant_id = 5) const uint DELTA_ONLY = 0;
const uint TX = 16;                    // column groups (attention_tiles.glsl)
#include "attention_tiles.glsl"

shared vec4 qs[ROWS * SROW];           // the workgroup's queries
shared vec4 gs[ROWS * SROW];           // ... and their output gradients
shared vec4 ks[COLS * SROW];           // the streamed keys
shared vec4 vs[COLS * SROW];           // ... and values
shared vec4 dt[COLS * TROW];           // ds, transposed: dt[key][rows]
shared float lse_s[ROWS], delta_s[ROWS];

#include "attention_kv_ahead.glsl"

void main() {
    uint tid = gl_LocalInvocationIndex, tx = tid % TX, ty = tid / TX;
    // causal: row blocks from the last, the longest (most keys seen) first
    uint block = CAUSAL != 0u ? gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x : gl_WorkGroupID.x;
    uint batch = gl_WorkGroupID.y, row0 = block * ROWS;
    Rows qr = rows_of(Q_ROWS, batch), kr = rows_of(K_ROWS, batch);
    Rows orr = rows_of(O_ROWS, batch);
    if (DELTA_ONLY == 0u) {
        LOAD_ROWS(qs, p.q, qr, row0, ROWS, p.L);
    }
    LOAD_ROWS(gs, p.g, orr, row0, ROWS, p.L);
    barrier();                         // (the g rows, read for delta)
    // each row's lse, and its delta = g . o (g from the shared rows), for the keys' kernel too
    if (tid < ROWS) {
        uint row = row0 + tid;
        float delta = 0.0, lse = 0.0;
        if (row < p.L) {
            uint at = row_at(orr, row) / 4u;
            for (uint e = 0; e < QROW; ++e)
                DOT4(delta, gs[tid * SROW + e], load_quad(p.o, at + e));
            lse = p.lse.v[batch * p.L + row];
            p.delta.v[batch * p.L + row] = delta;
        }
        lse_s[tid] = lse;
        delta_s[tid] = delta;
    }
    if (DELTA_ONLY != 0u) return;
    float s[4][PER], dp[4][PER];
    vec4 acc[4][QUADS];
    for (uint r = 0; r < 4; ++r)
        for (uint e = 0; e < QUADS; ++e) acc[r][e] = vec4(0.0);
    // keys these rows see: all, or (causal) up to the last row
    uint last = CAUSAL != 0u ? min(p.S, row0 + ROWS) : p.S;
    if (last > 0u) {
        fetch(kr, 0u);
        stash();
    }
    for (uint j0 = 0; j0 < last; j0 += COLS) {
        barrier();                     // this tile (and, the first time, the rows) stored
        if (j0 + COLS < last) fetch(kr, j0 + COLS);     // (in flight while this one is used)
        SCORES(s, qs, ks, ty, tx);
        SCORES(dp, gs, vs, ty, tx);
        for (uint c = 0; c < PER; ++c) {
            uint j = j0 + tx + TX * c;
            vec4 ds;
            for (uint r = 0; r < 4; ++r) {
                uint i = 4u * ty + r;
                bool seen = row0 + i < p.L && j < p.S && (CAUSAL == 0u || j <= row0 + i);
                float w = seen ? exp(s[r][c] * p.scale - lse_s[i]) : 0.0;
                ds[r] = w * (dp[r][c] - delta_s[i]) * p.scale;
            }
            dt[(tx + TX * c) * TROW + ty] = ds;
        }
        barrier();
        ACCUMULATE(acc, dt, ks, ty, tx);
        if (j0 + COLS < last) {
            barrier();                 // every read of this tile is done
            stash();
        }
    }
    for (uint r = 0; r < 4; ++r) {
        uint row = row0 + 4u * ty + r;
        if (row >= p.L) break;
        uint at = row_at(qr, row) / 4u;
        for (uint e = 0; e < QUADS; ++e) store_quad(p.dq, at + tx + TX * e, acc[r][e]);
    }
}
