#version 460
// Cumulative sums along an axis, the tensor read as (lines, n) or (outer, n, inner); the twin
// of dualgrad/cpu/scan.py. Logical element j of a line is at position j, or n - 1 - j with
// REVERSE (the sum from the end: cumsum's gradient).
// MODE 0 (COLUMNS): a thread a line, adding along it in order (lines of stride `inner`).
// MODE 1 (CHUNKS): a workgroup a chunk of CHUNK contiguous elements of a line (inner 1):
//   each thread adds its 4, the workgroup scans the 256 partial sums in shared memory, and
//   the chunk's total goes to sums[line * chunks + chunk].
// MODE 2 (ADD): after the chunk totals are scanned, chunk c > 0 adds the sum of those
//   before it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;

layout(push_constant) uniform Push {
    Floats x; Floats out0; Floats sums;
    uint lines; uint n; uint inner; uint chunks; uint reverse;
} p;

const uint CHUNK = 4 * WG;
shared float partial[WG];

uint at(uint line_base, uint j) { return line_base + (p.reverse != 0u ? p.n - 1u - j : j); }

void columns() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint t = gl_GlobalInvocationID.x; t < p.lines; t += stride) {
        uint o = t / p.inner, k = t % p.inner, base = o * p.n * p.inner + k;
        float acc = 0.0;
        for (uint j = 0; j < p.n; ++j) {
            uint i = base + (p.reverse != 0u ? p.n - 1u - j : j) * p.inner;
            acc += p.x.v[i];
            p.out0.v[i] = acc;
        }
    }
}

void chunk(uint line, uint c) {
    uint lid = gl_LocalInvocationID.x, base = line * p.n, first = c * CHUNK + 4u * lid;
    float v[4], acc = 0.0;
    for (uint q = 0; q < 4u; ++q) {
        uint j = first + q;
        acc += j < p.n ? p.x.v[at(base, j)] : 0.0;
        v[q] = acc;
    }
    partial[lid] = acc;
    barrier();
    for (uint d = 1u; d < WG; d <<= 1) {          // Hillis and Steele: inclusive prefix sums
        float add = lid >= d ? partial[lid - d] : 0.0;
        barrier();
        partial[lid] += add;
        barrier();
    }
    float before = lid > 0u ? partial[lid - 1u] : 0.0;
    for (uint q = 0; q < 4u; ++q) {
        uint j = first + q;
        if (j < p.n) p.out0.v[at(base, j)] = before + v[q];
    }
    if (lid == WG - 1u) p.sums.v[line * p.chunks + c] = partial[lid];
    barrier();                                    // (partial is reused by the next chunk)
}

void add(uint line, uint c) {
    if (c == 0u) return;
    float before = p.sums.v[line * p.chunks + c - 1u];
    uint base = line * p.n;
    for (uint q = 0; q < 4u; ++q) {
        uint j = c * CHUNK + q * WG + gl_LocalInvocationID.x;
        if (j < p.n) p.out0.v[at(base, j)] += before;
    }
}

void main() {
    if (MODE == 0u) {
        columns();
        return;
    }
    for (uint line = gl_WorkGroupID.y; line < p.lines; line += gl_NumWorkGroups.y)
        for (uint c = gl_WorkGroupID.x; c < p.chunks; c += gl_NumWorkGroups.x) {
            if (MODE == 1u) chunk(line, c);
            else add(line, c);
        }
}
