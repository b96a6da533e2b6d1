#version 460
// Fused attention, softmax(q k^T * scale) v, with an optional causal mask (key j takes part
// in query row i's attention where j <= i); the twin of dualgrad/cpu/attention.py. No
// L x S matrix is ever stored: a thread holds one row and the other operand streams past
// it through shared memory, TILE rows at a time.
// MODE 0 (forward): a thread per query row, an online softmax (the running maximum m, the
//   sum l of exp(s - m) and the weighted sum of v rows, rescaled whenever m grows); it
//   writes o = acc / l and lse = m + log(l).
// MODE 1 (backward, queries): a thread per query row recomputes each weight from lse,
//   p = exp(s - lse), and adds ds = p (dp - delta) * scale times k_j into dq (dp = g_i . v_j,
//   delta = g_i . o_i, which it also writes for MODE 2).
// MODE 2 (backward, keys): a thread per key row adds p g_i into dv and ds q_i into dk.
// Rows are a batch's: workgroup y is the batch (batch * L rows of q, batch * S of k, v).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint HEAD = 64;      // the rows' length (q, k and v alike)
layout(constant_id = 2) const uint CAUSAL = 0;
// Rows of the other operand a step: 32, or 16 where heads of 128 would need more shared
// memory than the device has (lavapipe's 32 KiB).
layout(constant_id = 3) const uint TILE = 32;
const uint ROWS = 64;                              // a workgroup's rows: one a thread
// 1 / 2: q, k, v, o, g and the gradients stored as float16 / bfloat16 (attention16.glsl)
layout(constant_id = 4) const uint LOW = 0;

layout(push_constant) uniform Push {
    Floats q; Floats k; Floats v; Floats o; Floats lse; Floats g; Floats delta;
    Floats dq; Floats dk; Floats dv;
    uint L; uint S; float scale;
    uint H; uint q_outer; uint q_row; uint k_outer; uint k_row; uint o_outer; uint o_row;
} p;
#include "attention_rows.glsl"
#include "attention16.glsl"

shared float tile_a[TILE * HEAD];
shared float tile_b[TILE * HEAD];
shared float tile_lse[TILE];
shared float tile_delta[TILE];

// Rows [first, first + TILE) of a and b (their rows where `ra`, `rb` say:
// attention_rows.glsl), n rows each, into the shared tiles (zeros past n).
void load_tiles(Floats a, Rows ra, Floats b, Rows rb, uint first, uint n) {
    barrier();
    for (uint e = gl_LocalInvocationID.x; e < TILE * HEAD; e += ROWS) {
        uint r = first + e / HEAD;
        tile_a[e] = r < n ? load_at(a, row_at(ra, r) + e % HEAD) : 0.0;
        tile_b[e] = r < n ? load_at(b, row_at(rb, r) + e % HEAD) : 0.0;
    }
}

void main() {
    uint lid = gl_LocalInvocationID.x, batch = gl_WorkGroupID.y;
    // Under the causal mask the last query rows see the most keys: MODES 0 and 1 take the
    // row blocks from the last, so the longest workgroups start first and the short ones
    // fill the tail (MODE 2's first keys are its longest already).
    uint block = CAUSAL != 0u && MODE != 2u ? gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x
                                            : gl_WorkGroupID.x;
    uint row = block * ROWS + lid;
    Rows qr = rows_of(Q_ROWS, batch), kr = rows_of(K_ROWS, batch);
    Rows orr = rows_of(O_ROWS, batch);
    float r0[HEAD], r1[HEAD], acc0[HEAD], acc1[HEAD];
    if (MODE == 0u || MODE == 1u) {
        bool live = row < p.L;
        uint qa = row_at(qr, row), oa = row_at(orr, row);
        float m = -f_inf(), l = 0.0, lse_i = 0.0, delta_i = 0.0;
        for (uint d = 0; d < HEAD; ++d) {
            r0[d] = live ? load_at(p.q, qa + d) : 0.0;
            r1[d] = live && MODE == 1u ? load_at(p.g, oa + d) : 0.0;
            delta_i += live && MODE == 1u ? r1[d] * load_at(p.o, oa + d) : 0.0;
            acc0[d] = 0.0;
        }
        if (MODE == 1u && live) {
            lse_i = p.lse.v[batch * p.L + row];
            p.delta.v[batch * p.L + row] = delta_i;
        }
        // keys this workgroup's rows need: all, or (causal) up to its last row
        uint last = CAUSAL != 0u ? min(p.S, (block + 1u) * ROWS) : p.S;
        for (uint j0 = 0; j0 < last; j0 += TILE) {
            load_tiles(p.k, kr, p.v, kr, j0, p.S);
            barrier();
            if (!live) continue;
            uint n = min(TILE, p.S - j0);
            if (CAUSAL != 0u) n = row + 1u > j0 ? min(n, row + 1u - j0) : 0u;
            for (uint t = 0; t < n; ++t) {
                float s = 0.0;
                for (uint d = 0; d < HEAD; ++d) s += r0[d] * tile_a[t * HEAD + d];
                s *= p.scale;
                if (MODE == 0u) {
                    if (s > m) {
                        float c = exp(m - s);
                        l *= c;
                        for (uint d = 0; d < HEAD; ++d) acc0[d] *= c;
                        m = s;
                    }
                    float e = exp(s - m);
                    l += e;
                    for (uint d = 0; d < HEAD; ++d) acc0[d] += e * tile_b[t * HEAD + d];
                } else {
                    float dp = 0.0;
                    for (uint d = 0; d < HEAD; ++d) dp += r1[d] * tile_b[t * HEAD + d];
                    float ds = exp(s - lse_i) * (dp - delta_i) * p.scale;
                    for (uint d = 0; d < HEAD; ++d) acc0[d] += ds * tile_a[t * HEAD + d];
                }
            }
        }
        if (!live) return;
        if (MODE == 0u) {
            if (LOW == 0u) {
                for (uint d = 0; d < HEAD; ++d) p.o.v[oa + d] = acc0[d] / l;
            } else {
                for (uint d = 0; d < HEAD; d += 2) store_pair(p.o, oa + d, acc0[d] / l,
                                                              acc0[d + 1] / l);
            }
            p.lse.v[batch * p.L + row] = m + log(l);
        } else if (LOW == 0u) {
            for (uint d = 0; d < HEAD; ++d) p.dq.v[qa + d] = acc0[d];
        } else {
            for (uint d = 0; d < HEAD; d += 2) store_pair(p.dq, qa + d, acc0[d], acc0[d + 1]);
        }
        return;
    }
    // MODE 2: key row `row`
    bool live = row < p.S;
    uint at = row_at(kr, row);
    for (uint d = 0; d < HEAD; ++d) {
        r0[d] = live ? load_at(p.k, at + d) : 0.0;
        r1[d] = live ? load_at(p.v, at + d) : 0.0;
        acc0[d] = 0.0;
        acc1[d] = 0.0;
    }
    // query rows that may see this workgroup's keys: all, or (causal) from its first key
    uint first = CAUSAL != 0u ? (gl_WorkGroupID.x * ROWS) / TILE * TILE : 0u;
    for (uint i0 = first; i0 < p.L; i0 += TILE) {
        load_tiles(p.q, qr, p.g, orr, i0, p.L);
        if (lid < TILE) {
            bool in_ = i0 + lid < p.L;
            tile_lse[lid] = in_ ? p.lse.v[batch * p.L + i0 + lid] : 0.0;
            tile_delta[lid] = in_ ? p.delta.v[batch * p.L + i0 + lid] : 0.0;
        }
        barrier();
        if (!live) continue;
        uint n = min(TILE, p.L - i0);
        for (uint t = 0; t < n; ++t) {
            if (CAUSAL != 0u && i0 + t < row) continue;
            float s = 0.0, dp = 0.0;
            for (uint d = 0; d < HEAD; ++d) {
                s += tile_a[t * HEAD + d] * r0[d];
                dp += tile_b[t * HEAD + d] * r1[d];
            }
            float e = exp(s * p.scale - tile_lse[t]);
            float ds = e * (dp - tile_delta[t]) * p.scale;
            for (uint d = 0; d < HEAD; ++d) {
                acc1[d] += e * tile_b[t * HEAD + d];
                acc0[d] += ds * tile_a[t * HEAD + d];
            }
        }
    }
    if (!live) return;
    if (LOW == 0u) {
        for (uint d = 0; d < HEAD; ++d) {
            p.dk.v[at + d] = acc0[d];
            p.dv.v[at + d] = acc1[d];
        }
    } else {
        for (uint d = 0; d < HEAD; d += 2) {
            store_pair(p.dk, at + d, acc0[d], acc0[d + 1]);
            store_pair(p.dv, at + d, acc1[d], acc1[d + 1]);
        }
    }
}
