// The body of attention_tiled_grad.comp and attention_tiled_grad_dq.comp (which defines
// ATOMIC_DQ: dq too, each tile's share of it, ds^T k over the workgroup's keys, added
// atomically into p.dq, float32 and zeroed before; attention_tiled_dq.comp then makes
// delta alone). Two modules, as the atomics need VK_EXT_shader_atomic_float, which a device
// may not have.
#include "common.glsl"

layout(local_size_x_id = 2) in;        // ROWS / 4 row groups x TX column groups
layout(constant_id = 0) const uint HEAD = 64;
layout(constant_id = 1) const uint CAUSAL = 0;
layout(constant_id = 2) const uint THREADS = 128;
layout(constant_id = 3) const uint ROWS = 32;     // 32, or 16 where shared memory is short
// 1 / 2: q, k, v, o, g and the gradients stored as float16 / bfloat16 (attention16.glsl)
layout(constant_id = 4) const uint LOW = 0;
const uint TX = 16;                    // column groups (attention_tiles.glsl)
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

#ifdef ATOMIC_DQ
// dq of the tile's queries (4 q + r for q = ty, ty + ROWS / 4, ...), quad tx of the
// head, over the workgroup's keys (ds from dt: a query's row of ds by quads of keys),
// added to p.dq.
void add_dq(Rows qr, uint i0, uint ty, uint tx) {
    for (uint q = ty; q < COLS / 4; q += ROWS / 4) {
        vec4 acc[4];
        for (uint r = 0; r < 4; ++r) acc[r] = vec4(0.0);
        for (uint kq = 0; kq < ROWS / 4; ++kq) {
            vec4 w[4], x[4];
            for (uint r = 0; r < 4; ++r) w[r] = dt[(4u * q + r) * TROW + kq];
            for (uint m = 0; m < 4; ++m) x[m] = xs[(4u * kq + m) * SROW + tx];
            for (uint r = 0; r < 4; ++r)
                acc[r] += w[r].x * x[0] + w[r].y * x[1] + w[r].z * x[2] + w[r].w * x[3];
        }
        for (uint r = 0; r < 4; ++r) {
            uint i = i0 + 4u * q + r;
            if (i >= p.L) break;
            uint at = row_at(qr, i) + 4u * tx;
            for (uint c = 0; c < 4; ++c) atomicAdd(p.dq.v[at + c], acc[r][c]);
        }
    }
}
#endif

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
    float s[4][PER], dp[4][PER];
    // queries that may see this workgroup's keys: all, or (causal) from its first key
    uint first = CAUSAL != 0u ? key0 / COLS * COLS : 0u;
    if (first < p.L) {
        fetch(qr, orr, batch, first);
        stash();
    }
    for (uint i0 = first; i0 < p.L; i0 += COLS) {
        barrier();                     // this tile is stored
        SCORES(s, xs, ar, ty, tx);     // (keys x queries: the transposed scores)
        SCORES(dp, ys, br, ty, tx);
        // the next tile's loads issued here, where the scores' registers are free (as
        // attention_tiled_dq.comp's before its scores, they made this kernel 6% slower)
        if (i0 + COLS < p.L) fetch(qr, orr, batch, i0 + COLS);  // (in flight meanwhile)
        for (uint c = 0; c < PER; ++c) {
            uint i = i0 + tx + TX * c;
            vec4 w, ds;
            for (uint r = 0; r < 4; ++r) {
                uint j = key0 + 4u * ty + r;
                bool seen = i < p.L && j < p.S && (CAUSAL == 0u || j <= i);
                w[r] = seen ? exp(s[r][c] * p.scale - lse_s[tx + TX * c]) : 0.0;
                ds[r] = w[r] * (dp[r][c] - delta_s[tx + TX * c]) * p.scale;
            }
            wt[(tx + TX * c) * TROW + ty] = w;
            dt[(tx + TX * c) * TROW + ty] = ds;
        }
        barrier();
        ACCUMULATE(gv, wt, br, ty, tx);
        ACCUMULATE(gk, dt, ar, ty, tx);
#ifdef ATOMIC_DQ
        add_dq(qr, i0, ty, tx);
#endif
        if (i0 + COLS < p.L) {
            barrier();                 // every read of this tile is done
            stash();
        }
    }
    for (uint r = 0; r < 4; ++r) {
        uint j = key0 + 4u * ty + r;
        if (j >= p.S) break;
        for (uint e = 0; e < QUADS; ++e) {
            uint at = row_at(kr, j) / 4u + tx + TX * e;
            store_quad(p.dk, at, gk[r][e]);
            store_quad(p.dv, at, gv[r][e]);
        }
    }
}

void main() {
    uint tid = gl_LocalInvocationIndex;
    keys(tid % TX, tid / TX, gl_WorkGroupID.y, gl_WorkGroupID.x * ROWS);
}
