#version 460
// Fused attention's forward in tiles (rows of 64): attention.comp's MODE 0, the same online
// softmax, with a workgroup of 256 threads taking 64 query rows (128 threads and 32 rows
// where shared memory is short) and the keys streaming past 32 at a time
// (attention_tiles.glsl says how a thread's work is laid out: 16 column groups, a thread 4
// rows by 2 keys; 8 groups of 4 keys, half the threads, were 9% slower on an H100). Each
// row's running maximum is shared through `red` once a tile; its sum of weights is kept in
// parts, one a column group, and added up in order at the end.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x_id = 2) in;        // ROWS / 4 row groups x TX column groups
layout(constant_id = 0) const uint HEAD = 64;
layout(constant_id = 1) const uint CAUSAL = 0;
layout(constant_id = 2) const uint THREADS = 256;
layout(constant_id = 3) const uint ROWS = 64;     // 64, or 32 where shared memory is short
// 1 / 2: q, k, v, o, g and the gradients stored as float16 / bfloat16 (attention16.glsl)
layout(constant_id = 4) const uint LOW = 0;
const uint TX = 16;                    // column groups (attention_tiles.glsl)
#include "attention_tiles.glsl"

shared vec4 qs[ROWS * SROW];
shared vec4 ks[COLS * SROW];
shared vec4 vs[COLS * SROW];
shared vec4 pt[COLS * TROW];           // the weights, transposed: pt[key][rows]
shared float red[ROWS * TX];

#include "attention_kv_ahead.glsl"

void main() {
    uint tid = gl_LocalInvocationIndex, tx = tid % TX, ty = tid / TX;
    // causal: row blocks from the last, the longest (most keys seen) first
    uint block = CAUSAL != 0u ? gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x : gl_WorkGroupID.x;
    uint batch = gl_WorkGroupID.y, row0 = block * ROWS;
    Rows qr = rows_of(Q_ROWS, batch), kr = rows_of(K_ROWS, batch);
    Rows orr = rows_of(O_ROWS, batch);
    LOAD_ROWS(qs, p.q, qr, row0, ROWS, p.L);
    float m[4], l[4], s[4][PER];
    vec4 acc[4][QUADS];
    for (uint r = 0; r < 4; ++r) {
        m[r] = -f_inf();
        l[r] = 0.0;
        for (uint e = 0; e < QUADS; ++e) acc[r][e] = vec4(0.0);
    }
    // keys this workgroup's rows need: all, or (causal) up to its last row
    uint last = CAUSAL != 0u ? min(p.S, row0 + ROWS) : p.S;
    if (last > 0u) {
        fetch(kr, 0u);
        stash();
    }
    for (uint j0 = 0; j0 < last; j0 += COLS) {
        barrier();                     // this tile is stored
        if (j0 + COLS < last) fetch(kr, j0 + COLS);     // (in flight while this one is used)
        SCORES(s, qs, ks, ty, tx);
        float top[4];
        for (uint r = 0; r < 4; ++r) {
            top[r] = -f_inf();
            for (uint c = 0; c < PER; ++c) {
                uint j = j0 + tx + TX * c;
                bool seen = j < p.S && (CAUSAL == 0u || j <= row0 + 4u * ty + r);
                s[r][c] = seen ? s[r][c] * p.scale : -f_inf();
                top[r] = max(top[r], s[r][c]);
            }
            red[(4u * ty + r) * TX + tx] = top[r];
        }
        barrier();
        for (uint r = 0; r < 4; ++r) {
            float mt = m[r];
            for (uint t = 0; t < TX; ++t) mt = max(mt, red[(4u * ty + r) * TX + t]);
            // no key seen yet (mt = -inf): weights 0, nothing to rescale
            float c0 = mt == -f_inf() ? 1.0 : exp(m[r] - mt);
            float part = 0.0;
            for (uint c = 0; c < PER; ++c) {
                s[r][c] = mt == -f_inf() ? 0.0 : exp(s[r][c] - mt);
                part += s[r][c];
            }
            l[r] = l[r] * c0 + part;
            for (uint e = 0; e < QUADS; ++e) acc[r][e] *= c0;
            m[r] = mt;
        }
        for (uint c = 0; c < PER; ++c)
            pt[(tx + TX * c) * TROW + ty] = vec4(s[0][c], s[1][c], s[2][c], s[3][c]);
        barrier();
        ACCUMULATE(acc, pt, vs, ty, tx);
        if (j0 + COLS < last) {
            barrier();                 // every read of this tile's ks and vs is done
            stash();
        }
    }
    barrier();                         // every read of red is done
    for (uint r = 0; r < 4; ++r) red[(4u * ty + r) * TX + tx] = l[r];
    barrier();
    for (uint r = 0; r < 4; ++r) {
        uint row = row0 + 4u * ty + r;
        if (row >= p.L) break;
        float total = 0.0;
        for (uint t = 0; t < TX; ++t) total += red[(4u * ty + r) * TX + t];
        uint at = row_at(orr, row) / 4u;
        for (uint e = 0; e < QUADS; ++e) store_quad(p.o, at + tx + TX * e, acc[r][e] / total);
        if (tx == 0u) p.lse.v[batch * p.L + row] = m[r] + log(total);
    }
}
