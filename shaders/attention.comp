#version 460
// Fused attention, softmax(q k^T * scale) v, with an optional causal mask (key j takes part
// in query row i's attention where j <= i); the twin of dualgrad/cpu/attention.py. No
// L x S matrix is ever stored: a row is held by LANES threads, each owning every LANES-th
// element of it (so the row's registers are a LANES-th), and the other operand streams past
// through shared memory, TILE rows at a time, GROUP rows per step. A step's dot products
// are summed over the lanes through shared memory, in lane order (the same sums in every
// lane, whatever the timing). Every loop runs the same trips in the whole workgroup (a
// row's own mask decides what counts), so the barriers are in uniform control flow.
// MODE 0 (forward): an online softmax per query row (the running maximum m, the sum l of
//   exp(s - m) and the weighted sum of v rows, rescaled whenever m grows); it writes
//   o = acc / l and lse = m + log(l).
// MODE 1 (backward, queries): each weight recomputed from lse, p = exp(s - lse), and
//   ds = p (dp - delta) * scale times k_j added into dq (dp = g_i . v_j, delta = g_i . o_i,
//   which it also writes for MODE 2).
// MODE 2 (backward, keys): per key row, p g_i added into dv and ds q_i into dk.
// Rows are a batch's: workgroup y is the batch (batch * L rows of q, batch * S of k, v).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint HEAD = 64;      // the rows' length (q, k and v alike)
layout(constant_id = 2) const uint CAUSAL = 0;
const uint LANES = 4;                              // threads a row
const uint ROWS = 64;                              // rows a workgroup (256 / LANES)
const uint TILE = 32;                              // rows of the other operand a load
const uint GROUP = 4;                              // ... and a step
const uint SLICE = (HEAD + LANES - 1u) / LANES;    // elements of a row a thread owns

layout(push_constant) uniform Push {
    Floats q; Floats k; Floats v; Floats o; Floats lse; Floats g; Floats delta;
    Floats dq; Floats dk; Floats dv;
    uint L; uint S; float scale;
} p;

shared float tile_a[TILE * HEAD];
shared float tile_b[TILE * HEAD];
shared float tile_lse[TILE];
shared float tile_delta[TILE];
shared float partial[2][ROWS * LANES * 2 * GROUP];  // a step's dot products, by lane

uint lane() { return gl_LocalInvocationID.x % LANES; }
uint slot() { return gl_LocalInvocationID.x / LANES; }

// Rows [first, first + TILE) of a and b (from row base) into the shared tiles (zeros past
// n), and, where given, lse and delta beside them.
void load_tiles(Floats a, Floats b, uint base, uint first, uint n, bool with_stats) {
    barrier();
    for (uint e = gl_LocalInvocationID.x; e < TILE * HEAD; e += ROWS * LANES) {
        uint r = first + e / HEAD;
        uint at = (base + r) * HEAD + e % HEAD;
        tile_a[e] = r < n ? a.v[at] : 0.0;
        tile_b[e] = r < n ? b.v[at] : 0.0;
    }
    if (with_stats && gl_LocalInvocationID.x < TILE) {
        uint r = first + gl_LocalInvocationID.x;
        tile_lse[gl_LocalInvocationID.x] = r < n ? p.lse.v[base + r] : 0.0;
        tile_delta[gl_LocalInvocationID.x] = r < n ? p.delta.v[base + r] : 0.0;
    }
    barrier();
}

// The row's sums over its lanes of each lane's x[u] and y[u] (u < GROUP), into x and y.
void lane_sums(inout float x[GROUP], inout float y[GROUP], uint buf) {
    uint at = (slot() * LANES + lane()) * 2u * GROUP;
    [[unroll]] for (uint u = 0; u < GROUP; ++u) {
        partial[buf][at + u] = x[u];
        partial[buf][at + GROUP + u] = y[u];
    }
    memoryBarrierShared();
    barrier();
    uint first = slot() * LANES * 2u * GROUP;
    [[unroll]] for (uint u = 0; u < GROUP; ++u) {
        float sx = 0.0, sy = 0.0;
        [[unroll]] for (uint l = 0; l < LANES; ++l) {
            sx += partial[buf][first + l * 2u * GROUP + u];
            sy += partial[buf][first + l * 2u * GROUP + GROUP + u];
        }
        x[u] = sx;
        y[u] = sy;
    }
}

void main() {
    uint batch = gl_WorkGroupID.y, me = lane();
    uint row = gl_WorkGroupID.x * ROWS + slot();
    float r0[SLICE], r1[SLICE], acc0[SLICE], acc1[SLICE];
    uint buf = 0u;
    if (MODE == 0u || MODE == 1u) {
        bool live = row < p.L;
        uint at = (batch * p.L + row) * HEAD;
        float m = -f_inf(), l = 0.0, lse_i = 0.0;
        float own[GROUP], unused[GROUP];
        [[unroll]] for (uint u = 0; u < GROUP; ++u) { own[u] = 0.0; unused[u] = 0.0; }
        for (uint c = 0; c < SLICE; ++c) {
            uint d = me + c * LANES;
            bool in_ = live && d < HEAD;
            r0[c] = in_ ? p.q.v[at + d] : 0.0;
            r1[c] = in_ && MODE == 1u ? p.g.v[at + d] : 0.0;
            own[0] += in_ && MODE == 1u ? r1[c] * p.o.v[at + d] : 0.0;
            acc0[c] = 0.0;
        }
        float delta_i = 0.0;
        if (MODE == 1u) {
            lane_sums(own, unused, buf);
            buf ^= 1u;
            delta_i = own[0];
            if (live) {
                lse_i = p.lse.v[batch * p.L + row];
                if (me == 0u) p.delta.v[batch * p.L + row] = delta_i;
            }
        }
        // keys this workgroup's rows need: all, or (causal) up to its last row
        uint last = CAUSAL != 0u ? min(p.S, (gl_WorkGroupID.x + 1u) * ROWS) : p.S;
        for (uint j0 = 0; j0 < last; j0 += TILE) {
            load_tiles(p.k, p.v, batch * p.S, j0, p.S, false);
            uint n = min(TILE, p.S - j0), mine = live ? n : 0u;
            if (CAUSAL != 0u) mine = live && row + 1u > j0 ? min(n, row + 1u - j0) : 0u;
            for (uint t = 0; t < n; t += GROUP) {
                float s[GROUP], dp[GROUP];
                [[unroll]] for (uint u = 0; u < GROUP; ++u) { s[u] = 0.0; dp[u] = 0.0; }
                for (uint c = 0; c < SLICE; ++c) {
                    uint d = me + c * LANES;
                    if (d >= HEAD) break;
                    [[unroll]] for (uint u = 0; u < GROUP; ++u) {
                        s[u] += r0[c] * tile_a[(t + u) * HEAD + d];
                        if (MODE == 1u) dp[u] += r1[c] * tile_b[(t + u) * HEAD + d];
                    }
                }
                lane_sums(s, dp, buf);
                buf ^= 1u;
                if (MODE == 0u) {
                    float top = m, e[GROUP];
                    [[unroll]] for (uint u = 0; u < GROUP; ++u) {
                        s[u] = t + u < mine ? s[u] * p.scale : -f_inf();
                        top = max(top, s[u]);
                    }
                    if (top > m) {
                        float scale_down = exp(m - top);
                        l *= scale_down;
                        for (uint c = 0; c < SLICE; ++c) acc0[c] *= scale_down;
                        m = top;
                    }
                    [[unroll]] for (uint u = 0; u < GROUP; ++u) {
                        e[u] = t + u < mine ? exp(s[u] - m) : 0.0;
                        l += e[u];
                    }
                    for (uint c = 0; c < SLICE; ++c) {
                        uint d = min(me + c * LANES, HEAD - 1u);
                        float a = acc0[c];
                        [[unroll]] for (uint u = 0; u < GROUP; ++u)
                            a += e[u] * tile_b[(t + u) * HEAD + d];
                        acc0[c] = a;
                    }
                } else {
                    float ds[GROUP];
                    [[unroll]] for (uint u = 0; u < GROUP; ++u)
                        ds[u] = t + u < mine ? exp(s[u] * p.scale - lse_i) * (dp[u] - delta_i)
                                               * p.scale : 0.0;
                    for (uint c = 0; c < SLICE; ++c) {
                        uint d = min(me + c * LANES, HEAD - 1u);
                        float a = acc0[c];
                        [[unroll]] for (uint u = 0; u < GROUP; ++u)
                            a += ds[u] * tile_a[(t + u) * HEAD + d];
                        acc0[c] = a;
                    }
                }
            }
        }
        if (!live) return;
        for (uint c = 0; c < SLICE; ++c) {
            uint d = me + c * LANES;
            if (d >= HEAD) break;
            if (MODE == 0u) p.o.v[at + d] = acc0[c] / l;
            else p.dq.v[at + d] = acc0[c];
        }
        if (MODE == 0u && me == 0u) p.lse.v[batch * p.L + row] = m + log(l);
        return;
    }
    // MODE 2: key row `row`
    bool live = row < p.S;
    uint at = (batch * p.S + row) * HEAD;
    for (uint c = 0; c < SLICE; ++c) {
        uint d = me + c * LANES;
        bool in_ = live && d < HEAD;
        r0[c] = in_ ? p.k.v[at + d] : 0.0;
        r1[c] = in_ ? p.v.v[at + d] : 0.0;
        acc0[c] = 0.0;
        acc1[c] = 0.0;
    }
    // query rows that may see this workgroup's keys: all, or (causal) from its first key
    uint first = CAUSAL != 0u ? (gl_WorkGroupID.x * ROWS) / TILE * TILE : 0u;
    for (uint i0 = first; i0 < p.L; i0 += TILE) {
        load_tiles(p.q, p.g, batch * p.L, i0, p.L, true);
        uint n = min(TILE, p.L - i0);
        for (uint t = 0; t < n; t += GROUP) {
            float s[GROUP], dp[GROUP];
            [[unroll]] for (uint u = 0; u < GROUP; ++u) { s[u] = 0.0; dp[u] = 0.0; }
            for (uint c = 0; c < SLICE; ++c) {
                uint d = me + c * LANES;
                if (d >= HEAD) break;
                [[unroll]] for (uint u = 0; u < GROUP; ++u) {
                    s[u] += tile_a[(t + u) * HEAD + d] * r0[c];
                    dp[u] += tile_b[(t + u) * HEAD + d] * r1[c];
                }
            }
            lane_sums(s, dp, buf);
            buf ^= 1u;
            float e[GROUP], ds[GROUP];
            [[unroll]] for (uint u = 0; u < GROUP; ++u) {
                bool take = live && t + u < n && (CAUSAL == 0u || i0 + t + u >= row);
                e[u] = take ? exp(s[u] * p.scale - tile_lse[t + u]) : 0.0;
                ds[u] = take ? e[u] * (dp[u] - tile_delta[t + u]) * p.scale : 0.0;
            }
            for (uint c = 0; c < SLICE; ++c) {
                uint d = min(me + c * LANES, HEAD - 1u);
                float a = acc0[c], b = acc1[c];
                [[unroll]] for (uint u = 0; u < GROUP; ++u) {
                    b += e[u] * tile_b[(t + u) * HEAD + d];
                    a += ds[u] * tile_a[(t + u) * HEAD + d];
                }
                acc0[c] = a;
                acc1[c] = b;
            }
        }
    }
    if (!live) return;
    for (uint c = 0; c < SLICE; ++c) {
        uint d = me + c * LANES;
        if (d >= HEAD) break;
        p.dk.v[at + d] = acc0[c];
        p.dv.v[at + d] = acc1[c];
    }
}
