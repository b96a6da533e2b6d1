#version 460
// where(cond, a, b): a where cond is nonzero, else b, with NumPy broadcasting of the three
// up to 4-D; the twin of dualgrad/cpu/logic.py's where. A selection copies 32-bit words, so
// one kernel serves float32 and int32 (and bool) values alike.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint FLAT = 0;

layout(push_constant) uniform Push {
    Ints cond; Ints a; Ints b; Ints out0;
    uint n; uint shape[4]; uint sc[4]; uint sa[4]; uint sb[4];
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint ic = i, ia = i, ib = i;
        if (FLAT == 0u) {
            uint rem = i;
            ic = 0u;
            ia = 0u;
            ib = 0u;
            for (int d = 3; d >= 0; --d) {
                uint c = rem % p.shape[d];
                rem /= p.shape[d];
                ic += c * p.sc[d];
                ia += c * p.sa[d];
                ib += c * p.sb[d];
            }
        }
        p.out0.v[i] = p.cond.v[ic] != 0 ? p.a.v[ia] : p.b.v[ib];
    }
}
