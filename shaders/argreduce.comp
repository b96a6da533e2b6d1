#version 460
// argmax / argmin along an axis, the tensor read as (outer, n, inner): the index of the
// first maximum (minimum), a NaN counting as past every number (as in PyTorch and NumPy);
// the twin of dualgrad/cpu/argreduce.py. TYPE 0: float32 values (compared by their bits,
// as integer keys in the floats' order: a device that flushes subnormals still orders
// them), 1: int32.
// MODE 0 (COLUMNS): a thread a line, in order. MODE 1 (CHUNKS, inner 1): a workgroup the
//   best of CHUNK elements of a line, to (vals, idx)[line * chunks + chunk]. MODE 2
//   (FINISH): a workgroup a line, the best of its chunks' (a line of one chunk is written
//   by MODE 1). Ties go to the lower index.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint MIN = 0;     // 1: argmin
layout(constant_id = 2) const uint TYPE = 0;

layout(push_constant) uniform Push {
    Ints x; Ints out0; Ints vals; Ints idx;
    uint lines; uint n; uint inner; uint chunks;
} p;

const uint CHUNK = 16 * WG;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};
shared int best_bits[WG];
shared uint best_at[WG];

// Whether value a (bits) at index ia beats b at ib.
bool beats(int a, uint ia, int b, uint ib) {
    if (TYPE == 0u) {
        bool na = (a & 0x7fffffff) > 0x7f800000, nb = (b & 0x7fffffff) > 0x7f800000;
        if (na || nb) return na && (!nb || ia < ib);
        a = a < 0 ? -(a & 0x7fffffff) : a;        // (the floats' order; -0 equals +0)
        b = b < 0 ? -(b & 0x7fffffff) : b;
    }
    if (a != b) return MIN != 0u ? a < b : a > b;
    return ia < ib;
}

// The workgroup's best of (best_bits, best_at) into slot 0 (0xFFFFFFFF: none).
void reduce_shared(uint lid) {
    barrier();
    for (uint half_ = WG / 2u; half_ > 0u; half_ >>= 1) {
        if (lid < half_) {
            uint other = best_at[lid + half_];
            if (other != 0xFFFFFFFFu && (best_at[lid] == 0xFFFFFFFFu ||
                    beats(best_bits[lid + half_], other, best_bits[lid], best_at[lid]))) {
                best_bits[lid] = best_bits[lid + half_];
                best_at[lid] = other;
            }
        }
        barrier();
    }
}

void columns() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint t = gl_GlobalInvocationID.x; t < p.lines; t += stride) {
        uint o = t / p.inner, k = t % p.inner, base = o * p.n * p.inner + k;
        int best = p.x.v[base];
        uint at = 0u;
        for (uint j = 1u; j < p.n; ++j) {
            int v = p.x.v[base + j * p.inner];
            if (beats(v, j, best, at)) { best = v; at = j; }
        }
        p.out0.v[t] = int(at);
    }
}

void chunk(uint line, uint c) {
    uint lid = gl_LocalInvocationID.x, first = c * CHUNK;
    uint end = min(first + CHUNK, p.n);
    int best = 0;
    uint at = 0xFFFFFFFFu;                       // (none yet)
    uint base = line * p.n;
    if (base % 4u == 0u && end - first == CHUNK) {   // a whole, aligned chunk: 16-byte loads
        for (uint q = (base + first) / 4u + lid; q < (base + end) / 4u; q += WG) {
            ivec4 v = IntQuads(p.x).v[q];
            uint j = 4u * q - base;
            for (uint k = 0u; k < 4u; ++k)
                if (at == 0xFFFFFFFFu || beats(v[k], j + k, best, at)) { best = v[k]; at = j + k; }
        }
    } else {
        for (uint j = first + lid; j < end; j += WG) {
            int v = p.x.v[base + j];
            if (at == 0xFFFFFFFFu || beats(v, j, best, at)) { best = v; at = j; }
        }
    }
    best_bits[lid] = best;
    best_at[lid] = at;
    reduce_shared(lid);
    if (lid == 0u) {
        if (p.chunks == 1u) {                    // (the line's answer: no FINISH pass)
            p.out0.v[line] = int(best_at[0]);
        } else {
            p.vals.v[line * p.chunks + c] = best_bits[0];
            p.idx.v[line * p.chunks + c] = int(best_at[0]);
        }
    }
    barrier();
}

void finish(uint line) {
    uint lid = gl_LocalInvocationID.x, base = line * p.chunks;
    int best = 0;
    uint at = 0xFFFFFFFFu;
    for (uint c = lid; c < p.chunks; c += WG) {
        int v = p.vals.v[base + c];
        uint j = uint(p.idx.v[base + c]);
        if (at == 0xFFFFFFFFu || beats(v, j, best, at)) { best = v; at = j; }
    }
    best_bits[lid] = best;
    best_at[lid] = at;
    reduce_shared(lid);
    if (lid == 0u) p.out0.v[line] = int(best_at[0]);
    barrier();
}

void main() {
    if (MODE == 0u) {
        columns();
        return;
    }
    for (uint line = gl_WorkGroupID.y; line < p.lines; line += gl_NumWorkGroups.y) {
        if (MODE == 2u) {
            if (gl_WorkGroupID.x == 0u) finish(line);
        } else {
            for (uint c = gl_WorkGroupID.x; c < p.chunks; c += gl_NumWorkGroups.x)
                chunk(line, c);
        }
    }
}
