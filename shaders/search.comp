#version 460
// Binary searches of sorted rows (searchsorted, bucketize): the twin of
// dualgrad/cpu/search.py. A thread a value: its index in its row by PyTorch's steps (the
// midpoint start + (end - start) / 2, moving right while not row[mid] >= v, or > with
// RIGHT), so unsorted rows give the cpu's answer too. TYPE 0: float32, compared by keys
// (a float's bits as an int in the floats' order, -0 as +0), so a device that flushes
// subnormals still orders them; a comparison with a NaN is false, as IEEE's. TYPE 1:
// int32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TYPE = 0;
layout(constant_id = 1) const uint RIGHT = 0;

layout(push_constant) uniform Push {
    Ints rows; Ints values; Ints out0;
    uint count; uint n; uint m; uint row_stride;
} p;

bool is_nan(int bits) { return (bits & 0x7FFFFFFF) > 0x7F800000; }

// The float whose bits are `bits` as an int in the floats' order (-0 as +0).
int key(int bits) {
    if (bits == int(0x80000000)) return 0;
    return bits < 0 ? bits ^ 0x7FFFFFFF : bits;
}

// row[mid] >= v (> with RIGHT): false where either is a NaN.
bool reaches(int r, int v) {
    if (TYPE == 0u) {
        if (is_nan(r) || is_nan(v)) return false;
        r = key(r);
        v = key(v);
    }
    return RIGHT != 0u ? r > v : r >= v;
}

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += stride) {
        uint base = (i / p.n) * p.row_stride;
        int v = p.values.v[i];
        uint start = 0u, end = p.m;
        while (start < end) {
            uint mid = start + (end - start) / 2u;
            if (reaches(p.rows.v[base + mid], v)) end = mid;
            else start = mid + 1u;
        }
        p.out0.v[i] = int(start);
    }
}
