#version 460
// Gather along rows and its backward; the twin of dualgrad/cpu/gather.py. BACKWARD = 0:
// out[r, k] = src[r, idx[r, k]] (src's only row where it has one), a thread an element,
// moved as an int: the bits of any dtype (int32 too), subnormals included, pass unchanged.
// BACKWARD = 1: out (rows, cols), zeroed by the caller, gets src[r, k] added at
// [r, idx[r, k]], a thread a row adding in k order: deterministic, no atomics, and the same
// sums as the cpu's. An index equal to skip (an ignored target) gathers 0, adds nothing.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint BACKWARD = 0;

layout(push_constant) uniform Push {
    Floats src; Ints idx; Floats out_;
    uint rows; uint k; uint cols; uint src_rows; int skip;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    if (BACKWARD == 0) {
        uint total = p.rows * p.k;
        for (uint e = gl_GlobalInvocationID.x; e < total; e += stride) {
            int j = p.idx.v[e];
            uint row = p.src_rows == 1u ? 0u : e / p.k;
            Ints(p.out_).v[e] = j == p.skip ? 0 : Ints(p.src).v[row * p.cols + uint(j)];
        }
    } else {
        for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += stride)
            for (uint c = 0; c < p.k; ++c) {
                int j = p.idx.v[r * p.k + c];
                if (j == p.skip) continue;
                uint at = r * p.cols + uint(j);
                p.out_.v[at] = p.out_.v[at] + p.src.v[r * p.k + c];
            }
    }
}
