#version 460
// Reductions of int32 along n of x read as [outer][n][inner] (dualgrad/kernel_ops.py's
// INT_REDUCE): sums wrapping as int32 arithmetic does, maxima, minima; the twin of
// dualgrad/cpu/intops.py's int_reduce. Each is associative, so each item combines its part
// into its output atomically (out set to the op's identity first) and every run gives the
// same result. An item is one output's elements r in [c * chunk, (c + 1) * chunk):
//   ROWS = 1 (inner is 1: a row is contiguous) a workgroup an item, its threads striding
//            the run, the workgroup's result combined in by one thread (one atomic an
//            item: a single line's items all meet in one word);
//   ROWS = 0 a thread an item, neighbouring threads on neighbouring outputs (coalesced).
// VEC = 1 (ROWS, n a multiple of 4: every run starts a quad) reads the run as ivec4s.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint VEC = 0;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

layout(push_constant) uniform Push {
    Ints x; Ints out0; uint n_out; uint n; uint inner; uint chunk; uint items;
} p;

shared int part[WG];                 // (a subgroup has at least one invocation)

const int IDENTITY = OP == INT_SUM ? 0 : (OP == INT_MAX ? -2147483647 - 1 : 2147483647);

int combine(int a, int b) {
    return OP == INT_SUM ? a + b : (OP == INT_MAX ? max(a, b) : min(a, b));
}

int subgroup_combine(int s) {
    return OP == INT_SUM ? subgroupAdd(s) : (OP == INT_MAX ? subgroupMax(s) : subgroupMin(s));
}

void combine_into(uint o, int s) {
    if (OP == INT_SUM) atomicAdd(p.out0.v[o], s);
    else if (OP == INT_MAX) atomicMax(p.out0.v[o], s);
    else atomicMin(p.out0.v[o], s);
}

void main() {
    if (ROWS != 0u) {
        uint chunks = p.items / p.n_out;
        for (uint item = gl_WorkGroupID.x; item < p.items; item += gl_NumWorkGroups.x) {
            uint row = item / chunks, start = (item % chunks) * p.chunk;
            uint end = min(start + p.chunk, p.n);
            int s = IDENTITY;
            if (VEC != 0u) {
                uint first = (row * p.n + start) / 4u, last = (row * p.n + end) / 4u;
                for (uint q = first + gl_LocalInvocationID.x; q < last; q += WG) {
                    ivec4 v = IntQuads(p.x).v[q];
                    s = combine(s, combine(combine(v.x, v.y), combine(v.z, v.w)));
                }
            } else {
                for (uint r = start + gl_LocalInvocationID.x; r < end; r += WG)
                    s = combine(s, p.x.v[row * p.n + r]);
            }
            s = subgroup_combine(s);
            if (subgroupElect()) part[gl_SubgroupID] = s;
            barrier();
            if (gl_LocalInvocationID.x == 0u) {
                for (uint k = 1u; k < gl_NumSubgroups; ++k) s = combine(s, part[k]);
                combine_into(row, s);
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
        int s = IDENTITY;
        for (uint r = start; r < end; ++r) s = combine(s, p.x.v[base + r * p.inner]);
        combine_into(o, s);
    }
}
