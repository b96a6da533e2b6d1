#version 460
// argmax / argmin along an axis, the tensor read as (outer, n, inner): the index of the
// first maximum (minimum), a NaN counting as past every number (as in PyTorch and NumPy);
// the twin of dualgrad/cpu/argreduce.py. TYPE 0: float32 values, 1: int32.
// MODE 0 (COLUMNS): a thread a line, in order. MODE 1 (CHUNKS, inner 1): a workgroup the
//   best of `chunk` elements of a line; a line of several chunks leaves (key, index)
//   partial results, and the workgroup that counts in last for the line compares them in
//   the same dispatch (as reduce.comp's FINISH). Ties go to the lower index.
//
// Every value is compared by a key, an int that is larger for the better value: a float's
// bits as an integer in the floats' order (so a device that flushes subnormals still
// orders them; -0 equals +0), complemented for argmin, and the largest int for a NaN. The
// walk over a chunk is then one integer compare and two selects an element.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint MIN = 0;     // 1: argmin
layout(constant_id = 2) const uint TYPE = 0;

// Partial results another workgroup reads back within the dispatch: coherent, as in
// reduce.comp.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Partials {
    int v[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Counters { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

layout(push_constant) uniform Push {
    Ints x; Ints out0; Partials keys; Partials idx; Counters counters;
    uint lines; uint n; uint inner; uint chunks; uint chunk;
} p;

const uint NONE = 0xFFFFFFFFu;   // no index yet: loses to every index
shared int best_key[WG];
shared uint best_at[WG];
shared bool last_chunk;

int key_of(int a) {
    if (TYPE == 0u) {
        int m = a & 0x7fffffff;
        if (m > 0x7f800000) return 0x7fffffff;   // NaN: past every number, either way
        a = a < 0 ? -m : m;
    }
    return MIN != 0u ? ~a : a;
}

// Whether (k, i) beats (best, at): a larger key, or the same key at a lower index.
bool beats(int k, uint i, int best, uint at) {
    return k > best || (k == best && i < at);
}

// The workgroup's best (key, index) into slot 0.
void reduce_shared(uint lid, int k, uint at) {
    best_key[lid] = k;
    best_at[lid] = at;
    barrier();
    [[unroll]] for (uint half_ = WG / 2u; half_ > 0u; half_ >>= 1) {
        if (lid < half_ && beats(best_key[lid + half_], best_at[lid + half_],
                                 best_key[lid], best_at[lid])) {
            best_key[lid] = best_key[lid + half_];
            best_at[lid] = best_at[lid + half_];
        }
        barrier();
    }
}

void columns() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint t = gl_GlobalInvocationID.x; t < p.lines; t += stride) {
        uint o = t / p.inner, k = t % p.inner, base = o * p.n * p.inner + k;
        int best = key_of(p.x.v[base]);
        uint at = 0u;
        for (uint j = 1u; j < p.n; ++j) {
            int v = key_of(p.x.v[base + j * p.inner]);
            if (v > best) { best = v; at = j; }
        }
        p.out0.v[t] = int(at);
    }
}

// The last workgroup of a line: the best of its chunks' partial results.
void finish(uint line, uint lid) {
    memoryBarrierBuffer();
    uint base = line * p.chunks;
    int best = int(0x80000000u);
    uint at = NONE;
    for (uint c = lid; c < p.chunks; c += WG) {
        int k = p.keys.v[base + c];
        uint i = uint(p.idx.v[base + c]);
        if (beats(k, i, best, at)) { best = k; at = i; }
    }
    reduce_shared(lid, best, at);
    if (lid == 0u) {
        p.out0.v[line] = int(best_at[0]);
        p.counters.v[line] = 0u;
    }
}

void chunk(uint line, uint c) {
    uint lid = gl_LocalInvocationID.x, first = c * p.chunk;
    uint end = min(first + p.chunk, p.n);
    int best = int(0x80000000u);
    uint at = NONE;
    uint base = line * p.n;
    if (base % 4u == 0u && (end - first) % 4u == 0u) {   // aligned quads: 16-byte loads
        for (uint q = (base + first) / 4u + lid; q < (base + end) / 4u; q += WG) {
            ivec4 v = IntQuads(p.x).v[q];
            uint j = 4u * q - base;
            [[unroll]] for (uint k = 0u; k < 4u; ++k) {
                int key = key_of(v[k]);
                if (beats(key, j + k, best, at)) { best = key; at = j + k; }
            }
        }
    } else {
        for (uint j = first + lid; j < end; j += WG) {
            int key = key_of(p.x.v[base + j]);
            if (beats(key, j, best, at)) { best = key; at = j; }
        }
    }
    reduce_shared(lid, best, at);
    if (p.chunks == 1u) {                        // (the line's answer)
        if (lid == 0u) p.out0.v[line] = int(best_at[0]);
        barrier();
        return;
    }
    if (lid == 0u) {
        p.keys.v[line * p.chunks + c] = best_key[0];
        p.idx.v[line * p.chunks + c] = int(best_at[0]);
        memoryBarrierBuffer();
        last_chunk = atomicAdd(p.counters.v[line], 1u) == p.chunks - 1u;
    }
    barrier();
    if (last_chunk) finish(line, lid);
    barrier();                                   // shared state read before reuse
}

void main() {
    if (MODE == 0u) {
        columns();
        return;
    }
    for (uint line = gl_WorkGroupID.y; line < p.lines; line += gl_NumWorkGroups.y)
        for (uint c = gl_WorkGroupID.x; c < p.chunks; c += gl_NumWorkGroups.x)
            chunk(line, c);
}
