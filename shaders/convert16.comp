#version 460
// Conversions between float32 and the 16-bit float storage types, the twin of
// dualgrad/cpu/logic.py's cast for them. KIND 0: float16 (IEEE binary16), 1: bfloat16.
// MODE 0: float32 -> 16 bits, rounded to nearest even (past the largest finite value to
// inf, subnormal results kept, NaN stays NaN with its sign); a thread writes one 32-bit
// word, two results. MODE 1: 16 bits -> float32, exact. All of it in integer arithmetic
// on the bits, so no device's flushing of subnormals can touch it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = 0;
layout(constant_id = 1) const uint MODE = 0;

layout(push_constant) uniform Push { Ints x; Ints out0; uint n; } p;

uint to_half(uint u) {
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);   // NaN, quiet
    if (a >= 0x477ff000u) return sign | 0x7c00u;   // 65520 and up (ties to even) -> inf
    if (a >= 0x38800000u) {                        // a normal half: 2^-14 and up
        uint r = a - 0x38000000u;                  // the exponent's bias 127 -> 15
        r += 0x0fffu + ((r >> 13) & 1u);           // (a carry moves into the exponent)
        return sign | (r >> 13);
    }
    if (a <= 0x33000000u) return sign;             // 2^-25 and below -> zero (2^-25: a tie)
    uint e = a >> 23;                              // a subnormal half: k units of 2^-24
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint s = 126u - e;                             // k = m / 2^s, s in [14, 24]
    uint k = m >> s;
    uint rem = m & ((1u << s) - 1u);
    uint tie = 1u << (s - 1u);
    if (rem > tie || (rem == tie && (k & 1u) != 0u)) k += 1u;
    return sign | k;                               // (k = 0x400: the smallest normal)
}

uint to_bf16(uint u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;        // NaN, quiet
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

uint from_half(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    if (e == 31u) return sign | 0x7f800000u | (m << 13);
    if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u) return sign;
    uint b = uint(findMSB(m));                     // m 2^-24 = 2^(b - 24) (1.f)
    return sign | ((b + 103u) << 23) | ((m << (23u - b)) & 0x7fffffu);
}

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
