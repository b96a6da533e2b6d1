#version 460
// Reductions of int32 along n of x read as [outer][n][inner] (dualgrad/kernel_ops.py's
// INT_REDUCE): sums wrapping as int32 arithmetic does, maxima, minima; the twin of
// dualgrad/cpu/intops.py's int_reduce. Each is associative, so the parts of an output may
// be combined in any order and every run gives the same result. An item is one output's
// elements r in [c * chunk, (c + 1) * chunk):
//   ROWS = 1 (inner is 1: a row is contiguous) a workgroup an item, its threads striding
//            the run; the workgroup's result, by one thread, is
//            FINISH = 0: combined into its output atomically (out set to the op's
//                        identity first, by a fill before the dispatch);
//            FINISH = 1: the output itself where a row is one item, else written to
//                        partials[item], the last item of a row to count in (counters,
//                        zero before and after) combining the row's partial results into
//                        the output: no fill, and no barrier between a fill and the
//                        dispatch (on an H100 one line of 16M took 0.046 ms with them,
//                        its kernel 0.028);
//   ROWS = 0 a thread an item, neighbouring threads on neighbouring outputs (coalesced),
//            combined as FINISH = 0.
// VEC = 1 (ROWS, n a multiple of 4: every run starts a quad) reads the run as ivec4s.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint ROWS = 1;
layout(constant_id = 2) const uint VEC = 0;
layout(constant_id = 3) const uint FINISH = 0;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

// Partial results another workgroup reads back within the dispatch: coherent, as in
// reduce.comp.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Partials {
    int v[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Counters { uint v[]; };

layout(push_constant) uniform Push {
    Ints x; Ints out0; Partials partials; Counters counters;
    uint n_out; uint n; uint inner; uint chunk; uint items;
} p;

shared int part[WG];                 // (a subgroup has at least one invocation)
shared bool last_item;

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

// The workgroup's values combined, in thread 0 (the others' are their subgroups').
int workgroup_combine(int s) {
    s = subgroup_combine(s);
    if (subgroupElect()) part[gl_SubgroupID] = s;
    barrier();
    if (gl_LocalInvocationID.x == 0u)
        for (uint k = 1u; k < gl_NumSubgroups; ++k) s = combine(s, part[k]);
    barrier();                               // (part is written again next item)
    return s;
}

// FINISH: the workgroup's result s (in thread 0) for item `item` of row `row`, of `chunks`.
void finish(uint row, uint item, uint chunks, int s) {
    uint lid = gl_LocalInvocationID.x;
    if (chunks == 1u) {
        if (lid == 0u) p.out0.v[row] = s;
        return;
    }
    if (lid == 0u) {
        p.partials.v[item] = s;
        memoryBarrierBuffer();
        last_item = atomicAdd(p.counters.v[row], 1u) == chunks - 1u;
    }
    barrier();
    if (last_item) {                         // (shared: the same in every thread)
        memoryBarrierBuffer();
        int t = IDENTITY;
        for (uint k = lid; k < chunks; k += WG) t = combine(t, p.partials.v[row * chunks + k]);
        t = workgroup_combine(t);
        if (lid == 0u) {
            p.out0.v[row] = t;
            p.counters.v[row] = 0u;
        }
    }
    barrier();                               // (last_item is set again next item)
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
            s = workgroup_combine(s);
            if (FINISH != 0u) finish(row, item, chunks, s);
            else if (gl_LocalInvocationID.x == 0u) combine_into(row, s);
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
