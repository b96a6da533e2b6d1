#version 460
// dL/dlogits of the mean softmax cross-entropy: (softmax(x) - onehot(t)) * g / rows, with
// softmax recomputed as exp((x - max) - log sum) from the forward's per-row max and log sum
// (lse: two floats a row); the twin of
// dualgrad/cpu/softmax.py's softmax_cross_entropy_backward.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    Floats x; Ints t; Floats lse; Floats g; Floats out_;
    uint rows; uint n;
} p;

void main() {
    uint total = p.rows * p.n, stride = gl_NumWorkGroups.x * WG;
    float scale = p.g.v[0] / float(p.rows);
    for (uint i = gl_GlobalInvocationID.x; i < total; i += stride) {
        uint r = i / p.n, j = i % p.n;
        float prob = exp((p.x.v[i] - p.lse.v[2 * r]) - p.lse.v[2 * r + 1]);
        p.out_.v[i] = (prob - (uint(p.t.v[r]) == j ? 1.0 : 0.0)) * scale;
    }
}
