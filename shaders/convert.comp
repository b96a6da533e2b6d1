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

int to_int(float v) {
    if (isnan(v)) return 0;
    if (v >= 2147483647.0) return 2147483647;      // (2^31: the first float past the range)
    if (v <= -2147483648.0) return -2147483647 - 1;
    return int(v);                                 // truncates toward zero
}

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        int bits = p.x.v[i];
        int r;
        if (FROM == 0u) {
            float v = intBitsToFloat(bits);
            // (to bool by the bits: a device that flushes subnormals would call them 0)
            r = TO == 0u ? bits : (TO == 1u ? to_int(v) : int((bits & 0x7fffffff) != 0));
        } else {
            r = TO == 0u ? floatBitsToInt(float(bits)) : (TO == 1u ? bits : int(bits != 0));
        }
        p.out0.v[i] = r;
    }
}
