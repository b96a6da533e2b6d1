#version 460
// Dropout with the Philox mask of dualgrad/cpu/dropout.py: element i is kept when the top
// 24 bits of word i % 4 of philox((i / 4, 0, step), seed) reach the threshold; kept
// elements are scaled by 1 / (1 - p). One thread per block of four elements.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    Floats x; Floats out_;
    uint n; uint threshold; uint seed_lo; uint seed_hi; uint step_lo; uint step_hi;
    float scale;
} p;

void main() {
    uint blocks = (p.n + 3) / 4, stride = gl_NumWorkGroups.x * WG;
    for (uint b = gl_GlobalInvocationID.x; b < blocks; b += stride) {
        uvec4 r = philox4x32(uvec4(b, 0u, p.step_lo, p.step_hi), uvec2(p.seed_lo, p.seed_hi));
        for (uint w = 0; w < 4; ++w) {
            uint i = b * 4 + w;
            if (i < p.n) p.out_.v[i] = (r[w] >> 8) >= p.threshold ? p.x.v[i] * p.scale : 0.0;
        }
    }
}
