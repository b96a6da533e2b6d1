#version 460
// Layer normalisation over rows (one workgroup per row), forward (BACKWARD = 0: y, mean,
// rstd) and the input gradient (BACKWARD = 1); the twin of dualgrad/cpu/layernorm.py.
// The parameter gradients are column sums, in layernorm_params.comp.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint BACKWARD = 0;
#include "rows.glsl"

layout(push_constant) uniform Push {
    Floats x; Floats gamma; Floats beta; Floats g; Floats out_; Floats mean; Floats rstd;
    uint rows; uint n; float eps;
} p;

void main() {
    uint lid = gl_LocalInvocationID.x;
    float inv_n = 1.0 / float(p.n);
    for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
        uint base = r * p.n;
        if (BACKWARD == 0) {
            float s = 0.0;
            for (uint j = lid; j < p.n; j += WG) s += p.x.v[base + j];
            float mu = wg_sum(s) / float(p.n);
            float v = 0.0;
            for (uint j = lid; j < p.n; j += WG) {
                float d = p.x.v[base + j] - mu;
                v += d * d;
            }
            float rs = 1.0 / sqrt(wg_sum(v) / float(p.n) + p.eps);
            if (lid == 0) { p.mean.v[r] = mu; p.rstd.v[r] = rs; }
            for (uint j = lid; j < p.n; j += WG)
                p.out_.v[base + j] = (p.x.v[base + j] - mu) * rs * p.gamma.v[j] + p.beta.v[j];
        } else {
            float mu = p.mean.v[r], rs = p.rstd.v[r];
            float a = 0.0, b = 0.0;
            for (uint j = lid; j < p.n; j += WG) {
                float dxhat = p.g.v[base + j] * p.gamma.v[j];
                a += dxhat;
                b += dxhat * (p.x.v[base + j] - mu) * rs;
            }
            a = wg_sum(a) * inv_n;
            b = wg_sum(b) * inv_n;
            for (uint j = lid; j < p.n; j += WG) {
                float xhat = (p.x.v[base + j] - mu) * rs;
                p.out_.v[base + j] = rs * (p.g.v[base + j] * p.gamma.v[j] - a - xhat * b);
            }
        }
    }
}
