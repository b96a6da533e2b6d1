#version 460
// where(cond, a, b): a where cond is nonzero, else b, with NumPy broadcasting of the three
// up to 4-D; the twin of dualgrad/cpu/logic.py's where. cond is bools (bytes.glsl); a
// selection copies 32-bit words, so one kernel serves float32 and int32 values alike.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "bytes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint FLAT = 0;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer IntQuads {
    ivec4 v[];
};

layout(push_constant) uniform Push {
    Ints cond; Ints a; Ints b; Ints out0;
    uint n; uint shape[4]; uint sc[4]; uint sa[4]; uint sb[4];
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    if (FLAT != 0u) {         // four elements a thread: a word of cond, 16-byte loads
        uint quads = p.n / 4u;
        for (uint q = gl_GlobalInvocationID.x; q < quads; q += stride) {
            uvec4 c = (uvec4(Words(p.cond).v[q]) >> uvec4(0u, 8u, 16u, 24u)) & 0xffu;
            IntQuads(p.out0).v[q] = mix(IntQuads(p.b).v[q], IntQuads(p.a).v[q],
                                        notEqual(c, uvec4(0u)));
        }
        uint i = quads * 4u + gl_GlobalInvocationID.x;
        if (i < p.n) p.out0.v[i] = byte_at(Words(p.cond), 0u, i) != 0u ? p.a.v[i] : p.b.v[i];
        return;
    }
    Words wc = word_of(p.cond);
    uint lc = lead_of(p.cond);
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint rem = i, ic = 0u, ia = 0u, ib = 0u;
        for (int d = 3; d >= 0; --d) {
            uint c = rem % p.shape[d];
            rem /= p.shape[d];
            ic += c * p.sc[d];
            ia += c * p.sa[d];
            ib += c * p.sb[d];
        }
        p.out0.v[i] = byte_at(wc, lc, ic) != 0u ? p.a.v[ia] : p.b.v[ib];
    }
}
