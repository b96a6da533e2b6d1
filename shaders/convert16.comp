#version 460
// Conversions between float32 and the 16-bit float storage types, the twin of
// dualgrad/cpu/logic.py's cast for them. KIND 0: float16 (IEEE binary16), 1: bfloat16.
// MODE 0: float32 -> 16 bits, rounded to nearest even (past the largest finite value to
// inf, subnormal results kept, NaN stays NaN with its sign); a thread writes one 32-bit
// word, two results. MODE 1: 16 bits -> float32, exact. All of it in integer arithmetic
// on the bits, so no device's flushing of subnormals can touch it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "round16.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = 0;
layout(constant_id = 1) const uint MODE = 0;

layout(push_constant) uniform Push { Ints x; Ints out0; uint n; } p;

uint narrow(uint u) { return KIND == 0u ? to_half(u) : to_bf16(u); }
uint widen(uint h) { return KIND == 0u ? from_half(h) : h << 16; }

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    if (MODE == 0u) {
        uint words = (p.n + 1u) / 2u;
        for (uint j = gl_GlobalInvocationID.x; j < words; j += stride) {
            uint lo = narrow(uint(p.x.v[2u * j]));
            uint hi = 2u * j + 1u < p.n ? narrow(uint(p.x.v[2u * j + 1u])) : 0u;
            p.out0.v[j] = int(lo | (hi << 16));
        }
    } else {
        for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
            uint word = uint(p.x.v[i >> 1]);
            uint h = (i & 1u) != 0u ? word >> 16 : word & 0xffffu;
            p.out0.v[i] = int(widen(h));
        }
    }
}
