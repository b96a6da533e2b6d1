#version 460
// Elementwise dtype conversion; the twin of dualgrad/cpu/logic.py's cast. FROM 0: float32,
// 1: int32, 2: bool (bytes, bytes.glsl). TO 0: float32 (an int rounds to nearest even),
// 1: int32 (a float truncates toward zero; past int32's range it saturates, NaN becomes 0),
// 2: bool (nonzero, NaN included, is 1).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "bytes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint FROM = 0;
layout(constant_id = 1) const uint TO = 0;

layout(push_constant) uniform Push { Ints x; Ints out0; uint n; } p;
layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

int to_int(float v) {
    if (isnan(v)) return 0;
    if (v >= 2147483647.0) return 2147483647;      // (2^31: the first float past the range)
    if (v <= -2147483648.0) return -2147483647 - 1;
    return int(v);                                 // truncates toward zero
}

// An element's bits (a bool's as an int 0 or 1) as the TO type's (a bool's as 0 or 1).
int convert(int bits) {
    if (FROM == 0u) {
        float v = intBitsToFloat(bits);
        // (to bool by the bits: a device that flushes subnormals would call them 0)
        return TO == 0u ? bits : (TO == 1u ? to_int(v) : int((bits & 0x7fffffff) != 0));
    }
    return TO == 0u ? floatBitsToInt(float(bits)) : (TO == 1u ? bits : int(bits != 0));
}

int element(uint i) { return FROM == 2u ? int(byte_at(Words(p.x), 0u, i)) : p.x.v[i]; }

// Four elements a thread (a word of bools, or a 16-byte load), then the n % 4 left over.
void main() {
    uint stride = gl_NumWorkGroups.x * WG, quads = p.n / 4;
    for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
        ivec4 x = FROM == 2u ? ivec4((uvec4(Words(p.x).v[q]) >> uvec4(0u, 8u, 16u, 24u)) & 0xffu)
                             : IntQuads(p.x).v[q];
        ivec4 y = ivec4(convert(x.x), convert(x.y), convert(x.z), convert(x.w));
        if (TO == 2u) Words(p.out0).v[q] = uint(y.x | y.y << 8 | y.z << 16 | y.w << 24);
        else IntQuads(p.out0).v[q] = y;
    }
    if (gl_GlobalInvocationID.x != 0u || quads * 4u == p.n) return;
    uint word = 0u;
    for (uint i = quads * 4u; i < p.n; ++i) {
        int y = convert(element(i));
        if (TO == 2u) word |= uint(y) << ((i & 3u) << 3);
        else p.out0.v[i] = y;
    }
    if (TO == 2u) Words(p.out0).v[quads] = word;           // (the rest of the word: pad)
}
