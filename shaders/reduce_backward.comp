#version 460
// Backward of the reductions: dx[i] = g[o(i)] (sum), g[o(i)] / count (mean), or
// g[o(i)] / ties[o(i)] where x[i] equals the maximum (max) or minimum (min); the twin of
// dualgrad/cpu/reduce.py's reduce_backward. o(i) maps an input element to its output
// through the output strides os (0 along reduced axes).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;

layout(push_constant) uniform Push {
    Floats x; Floats y; Floats g; Floats ties; Floats out_;
    uint n; uint xd[4]; uint os[4]; float divisor;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        uint o = 0, rem = i;
        for (int d = 3; d >= 0; --d) {
            o += (rem % p.xd[d]) * p.os[d];
            rem /= p.xd[d];
        }
        float g = p.g.v[o];
        if (OP == SUM) p.out_.v[i] = g;
        else if (OP == MEAN) p.out_.v[i] = g / p.divisor;
        // (g / ties) * [x == y], as PyTorch's amax and amin: a NaN y has no ties, so NaN
        else p.out_.v[i] = (g / p.ties.v[o]) * (p.x.v[i] == p.y.v[o] ? 1.0 : 0.0);
    }
}
