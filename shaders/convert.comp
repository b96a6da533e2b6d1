#version 460
// Elementwise dtype conversion; the twin of dualgrad/cpu/logic.py's cast. FROM 0: float32,
// 1: int32 (bools are int32 0 or 1). TO 0: float32 (an int rounds to nearest even), 1: int32
// (a float truncates toward zero; past int32's range it saturates, NaN becomes 0), 2: bool
// (nonzero, NaN included, is 1).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

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

int convert(int bits) {
    if (FROM == 0u) {
        float v = intBitsToFloat(bits);
        // (to bool by the bits: a device that flushes subnormals would call them 0)
        return TO == 0u ? bits : (TO == 1u ? to_int(v) : int((bits & 0x7fffffff) != 0));
    }
    return TO == 0u ? floatBitsToInt(float(bits)) : (TO == 1u ? bits : int(bits != 0));
}

// Four elements a thread through 16-byte loads and stores, then the n % 4 left over.
void main() {
    uint stride = gl_NumWorkGroups.x * WG, quads = p.n / 4;
    for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
        ivec4 x = IntQuads(p.x).v[q];
        IntQuads(p.out0).v[q] = ivec4(convert(x.x), convert(x.y), convert(x.z), convert(x.w));
    }
    uint i = quads * 4 + gl_GlobalInvocationID.x;
    if (i < p.n) p.out0.v[i] = convert(p.x.v[i]);
}
