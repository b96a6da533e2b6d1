#version 460
// Reductions: sum, mean, max over any axes, and COUNT_EQ (how many elements equal the
// maximum y, for max's backward); the twin of dualgrad/cpu/reduce.py. One workgroup per
// output element: each thread accumulates a strided share of the reduced elements, then a
// tree in shared memory combines the shares. Index maps: an output element's coordinates
// over the kept dims kd (reduced dims are 1) with input strides ks, a reduced element's
// coordinates over rd (kept dims are 1) with strides rs.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

layout(push_constant) uniform Push {
    Floats x; Floats y; Floats out_;
    uint n_out; uint count; uint kd[4]; uint ks[4]; uint rd[4]; uint rs[4];
} p;

shared float part[WG];

float combine(float acc, float v) {
    if (OP == MAX) return (!isnan(acc) && (v > acc || isnan(v))) ? v : acc;
    return acc + v;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    for (uint o = gl_WorkGroupID.x; o < p.n_out; o += gl_NumWorkGroups.x) {
        uint base = 0, rem = o;
        for (int d = 3; d >= 0; --d) {
            base += (rem % p.kd[d]) * p.ks[d];
            rem /= p.kd[d];
        }
        float target = OP == COUNT_EQ ? p.y.v[o] : 0.0;
        float acc = OP == MAX ? -f_inf() : 0.0;
        for (uint r = lid; r < p.count; r += WG) {
            uint off = base, rr = r;
            for (int d = 3; d >= 0; --d) {
                off += (rr % p.rd[d]) * p.rs[d];
                rr /= p.rd[d];
            }
            float v = p.x.v[off];
            acc = combine(acc, OP == COUNT_EQ ? (v == target ? 1.0 : 0.0) : v);
        }
        part[lid] = acc;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (lid < s) part[lid] = combine(part[lid], part[lid + s]);
            barrier();
        }
        if (lid == 0) p.out_.v[o] = OP == MEAN ? part[0] / float(p.count) : part[0];
        barrier();
    }
}
