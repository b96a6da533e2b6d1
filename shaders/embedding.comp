#version 460
// Embedding: the forward gathers rows (BACKWARD = 0: out[i, j] = table[idx[i], j], moved as
// bits, so int32 tables and any float payload pass unchanged on any device); the
// backward (BACKWARD = 1) sums, for each looked-up row u, the gradient rows of the
// positions that looked it up, in position order (order[seg[u] .. seg[u+1]) lists them,
// sorted stably on the host), so it is deterministic and needs no atomics.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint BACKWARD = 0;

layout(push_constant) uniform Push {
    Floats src; Ints idx; Ints order; Ints seg; Floats out_;
    uint count; uint dim;
} p;

void main() {
    uint total = p.count * p.dim, stride = gl_NumWorkGroups.x * WG;
    for (uint e = gl_GlobalInvocationID.x; e < total; e += stride) {
        uint i = e / p.dim, j = e % p.dim;
        if (BACKWARD == 0) {
            Ints(p.out_).v[e] = Ints(p.src).v[uint(p.idx.v[i]) * p.dim + j];
        } else {
            float acc = 0.0;
            for (int k = p.seg.v[i]; k < p.seg.v[i + 1]; ++k)
                acc += p.src.v[uint(p.order.v[k]) * p.dim + j];
            p.out_.v[uint(p.idx.v[i]) * p.dim + j] = acc;
        }
    }
}
