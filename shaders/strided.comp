#version 460
// Strided copies (up to 4-D); the twin of dualgrad/cpu/strided.py. Output element i has
// coordinates c over the dims od; its source is offset + sum(c[d] * st[d]) (a stride may be
// negative: a flip, or 0: a repeat). BACKWARD = 0 reads there (a slice, a permutation);
// BACKWARD = 1 writes there (out zeroed by the caller): the gradient of an injective read.
// Words are moved as ints: the bits of any dtype (int32, bools), subnormals included, pass
// unchanged.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint BACKWARD = 0;

layout(push_constant) uniform Push {
    Ints x; Ints out_;
    uint n; uint od[4]; int st[4]; int offset;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        int off = p.offset;
        uint rem = i;
        for (int d = 3; d >= 0; --d) {
            off += int(rem % p.od[d]) * p.st[d];
            rem /= p.od[d];
        }
        if (BACKWARD == 0)
            p.out_.v[i] = p.x.v[off];
        else
            p.out_.v[off] = p.x.v[i];
    }
}
