#version 460
// Embedding: the forward gathers rows (BACKWARD = 0: out[i, j] = table[idx[i], j], moved as
// bits, so int32 tables and any float payload pass unchanged on any device); the
// backward (BACKWARD = 1) sums, for each table row r, the gradient rows of the positions
// that looked it up, in position order: idx holds the n indices sorted stably (sort.comp)
// and order the positions they came from, so r's positions are the run of r in idx, found
// by binary search. Deterministic, no atomics, nothing on the host; a row never looked up
// gets 0.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint BACKWARD = 0;

layout(push_constant) uniform Push {
    Floats src; Ints idx; Ints order; Floats out_;
    uint count; uint dim; uint n;
} p;

// The first k in [0, n) with idx[k] >= r (n where none is): idx is sorted.
uint first_at_least(int r) {
    uint lo = 0u, hi = p.n;
    while (lo < hi) {
        uint mid = (lo + hi) / 2u;
        if (p.idx.v[mid] < r) lo = mid + 1u; else hi = mid;
    }
    return lo;
}

void main() {
    uint total = p.count * p.dim, stride = gl_NumWorkGroups.x * WG;
    for (uint e = gl_GlobalInvocationID.x; e < total; e += stride) {
        uint i = e / p.dim, j = e % p.dim;
        if (BACKWARD == 0) {
            Ints(p.out_).v[e] = Ints(p.src).v[uint(p.idx.v[i]) * p.dim + j];
        } else {
            float acc = 0.0;
            uint end = first_at_least(int(i) + 1);
            for (uint k = first_at_least(int(i)); k < end; ++k)
                acc += p.src.v[uint(p.order.v[k]) * p.dim + j];
            p.out_.v[e] = acc;
        }
    }
}
