#version 460
// out = x with its axes permuted (up to 4-D): output element i's coordinates over the
// output dims od, read from x through is (x's stride for each output axis).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    Floats x; Floats out_;
    uint n; uint od[4]; uint is_[4];
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint off = 0, rem = i;
        for (int d = 3; d >= 0; --d) {
            off += (rem % p.od[d]) * p.is_[d];
            rem /= p.od[d];
        }
        p.out_.v[i] = p.x.v[off];
    }
}
