#version 460
// Dropout with the Philox mask of dualgrad/cpu/dropout.py: element i is kept when the top
// 24 bits of word i % 4 of philox((i / 4, 0, step), seed) reach the threshold; kept
// elements are scaled by 1 / (1 - p). One thread per block of four elements.
// SCALAR_BUFFER 1: seed and step come from four words at address hp instead (a captured
// step rewrites them before each replay).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SCALAR_BUFFER = 0;

layout(push_constant) uniform Push {
    Floats x; Floats out_;
    uint n; uint threshold; uint seed_lo; uint seed_hi; uint step_lo; uint step_hi;
    float scale; Ints hp;
} p;

void main() {
    uvec4 s = SCALAR_BUFFER != 0u
        ? uvec4(p.hp.v[0], p.hp.v[1], p.hp.v[2], p.hp.v[3])
        : uvec4(p.seed_lo, p.seed_hi, p.step_lo, p.step_hi);
    uint blocks = (p.n + 3) / 4, stride = gl_NumWorkGroups.x * WG;
    for (uint b = gl_GlobalInvocationID.x; b < blocks; b += stride) {
        uvec4 r = philox4x32(uvec4(b, 0u, s.z, s.w), uvec2(s.x, s.y));
        for (uint w = 0; w < 4; ++w) {
            uint i = b * 4 + w;
            if (i < p.n) p.out_.v[i] = (r[w] >> 8) >= p.threshold ? p.x.v[i] * p.scale : 0.0;
        }
    }
}
