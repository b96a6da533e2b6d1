#version 460
// Sums of int32 along n of x read as [outer][n][inner], wrapping as int32 arithmetic does;
// the twin of dualgrad/cpu/intops.py's int_sum. Integer addition is associative, so each
// item adds its part into its output atomically (out zeroed first) and every run gives the
// same sums. An item is one output's elements r in [c * chunk, (c + 1) * chunk):
//   ROWS = 1 (inner is 1: a row is contiguous) a workgroup an item, its threads striding
//            the run, the workgroup's sum added by one thread (one atomic an item: a
//            single line's items all add into one word);
//   ROWS = 0 a thread an item, neighbouring threads on neighbouring outputs (coalesced).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint ROWS = 1;

layout(push_constant) uniform Push {
    Ints x; Ints out0; uint n_out; uint n; uint inner; uint chunk; uint items;
} p;

shared int part[WG];                 // (a subgroup has at least one invocation)

void main() {
    if (ROWS != 0u) {
        uint chunks = p.items / p.n_out;
        for (uint item = gl_WorkGroupID.x; item < p.items; item += gl_NumWorkGroups.x) {
            uint row = item / chunks, start = (item % chunks) * p.chunk;
            uint end = min(start + p.chunk, p.n);
            int s = 0;
            for (uint r = start + gl_LocalInvocationID.x; r < end; r += WG)
                s += p.x.v[row * p.n + r];
            s = subgroupAdd(s);
            if (subgroupElect()) part[gl_SubgroupID] = s;
            barrier();
            if (gl_LocalInvocationID.x == 0u) {
                for (uint k = 1u; k < gl_NumSubgroups; ++k) s += part[k];
                atomicAdd(p.out0.v[row], s);
            }
            barrier();                               // (part is written again next item)
        }
        return;
    }
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint item = gl_GlobalInvocationID.x; item < p.items; item += stride) {
        uint o = item % p.n_out, start = (item / p.n_out) * p.chunk;
        uint end = min(start + p.chunk, p.n);
        uint base = (o / p.inner) * p.n * p.inner + o % p.inner;
        int s = 0;
        for (uint r = start; r < end; ++r) s += p.x.v[base + r * p.inner];
        atomicAdd(p.out0.v[o], s);
    }
}
