#version 460
// Softmax / log-softmax over rows (OP 0 / 1), their backward (BACKWARD = 1), and the
// forward of the fused softmax cross-entropy (XENT = 1: per-row max, log sum and loss, and
// the losses' mean; with XENT_GRAD = 1 also dL/dlogits for dL/dloss = 1 into y, as
// xent_backward.comp makes it from the stored max and log sum); the twins of
// dualgrad/cpu/softmax.py. One workgroup per row.
//
// XENT's mean: each workgroup, its rows' losses stored, counts itself in at counters[0];
// the one that counts last adds every row's loss (thread j rows j, j + WG, ..., then a tree:
// an order that does not depend on timing), writes loss / rows and puts the counter back to
// 0 for the next dispatch. One dispatch, not a second reduction pass.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint LOG_ = 0;
layout(constant_id = 1) const uint BACKWARD = 0;
layout(constant_id = 2) const uint XENT = 0;
layout(constant_id = 3) const uint XENT_GRAD = 0;
#include "rows.glsl"

// Rows' losses that the last workgroup reads back within the dispatch: coherent, so neither
// their stores nor those loads stay in a cache the other workgroups do not see.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Rows {
    float v[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Counters { uint v[]; };

layout(push_constant) uniform Push {
    Floats x; Floats y; Floats g; Rows out_; Ints t; Floats lse; Counters counters;
    Floats loss; uint rows; uint n;
} p;

shared bool last_group;

// XENT: once this workgroup's rows are stored, count it in; the last one writes the mean.
void mean_of_rows() {
    uint lid = gl_LocalInvocationID.x;
    if (lid == 0) {
        memoryBarrierBuffer();
        last_group = atomicAdd(p.counters.v[0], 1u) == gl_NumWorkGroups.x - 1;
    }
    barrier();
    if (!last_group) return;
    memoryBarrierBuffer();
    float s = 0.0;
    for (uint r = lid; r < p.rows; r += WG) s += p.out_.v[r];
    s = wg_sum(s);
    if (lid == 0) {
        p.loss.v[0] = s / float(p.rows);
        p.counters.v[0] = 0u;
    }
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
        uint base = r * p.n;
        if (BACKWARD == 1) {
            // d softmax: y * (g - sum(g * y));  d log_softmax: g - exp(y) * sum(g)
            float s = 0.0;
            for (uint j = lid; j < p.n; j += WG)
                s += LOG_ == 1 ? p.g.v[base + j] : p.g.v[base + j] * p.y.v[base + j];
            s = wg_sum(s);
            for (uint j = lid; j < p.n; j += WG) {
                float yv = p.y.v[base + j], gv = p.g.v[base + j];
                p.out_.v[base + j] = LOG_ == 1 ? gv - exp(yv) * s : yv * (gv - s);
            }
            continue;
        }
        float m = -f_inf();
        for (uint j = lid; j < p.n; j += WG) m = max(m, p.x.v[base + j]);
        m = wg_max(m);
        float s = 0.0;
        for (uint j = lid; j < p.n; j += WG) s += exp(p.x.v[base + j] - m);
        s = wg_sum(s);
        // (x - m) - log s, not x - (m + log s): beside a big m that sum would lose log s
        float log_s = log(s);
        if (XENT == 1) {
            uint t = uint(p.t.v[r]);
            if (lid == 0) {       // the row's max and log sum, kept for the backward
                p.lse.v[2 * r] = m;
                p.lse.v[2 * r + 1] = log_s;
                p.out_.v[r] = (m - p.x.v[base + t]) + log_s;
            }
            if (XENT_GRAD == 1) {
                float scale = 1.0 / float(p.rows);
                for (uint j = lid; j < p.n; j += WG)
                    p.y.v[base + j] = (exp((p.x.v[base + j] - m) - log_s) -
                                       (t == j ? 1.0 : 0.0)) * scale;
            }
        } else if (LOG_ == 1) {
            for (uint j = lid; j < p.n; j += WG)
                p.out_.v[base + j] = (p.x.v[base + j] - m) - log_s;
        } else {
            for (uint j = lid; j < p.n; j += WG)
                p.out_.v[base + j] = exp(p.x.v[base + j] - m) / s;
        }
    }
    if (XENT == 1) mean_of_rows();
}
