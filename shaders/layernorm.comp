#version 460
// Layer normalisation over rows, forward (BACKWARD = 0: y, mean, rstd) and the input
// gradient (BACKWARD = 1); the twin of dualgrad/cpu/layernorm.py. The parameter gradients
// are column sums, in layernorm_params.comp.
//
// Short rows (SUBGROUP_ROWS = 1) take a subgroup each, its sums by subgroupAdd: a workgroup
// of 256 threads a row of 256 spent its time in the trees' barriers. Long rows take a
// workgroup each. Either way rows are taken in a grid-stride loop, so the dispatch's size
// only needs to cover them for the subgroup size the host expects (32).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint BACKWARD = 0;
layout(constant_id = 1) const uint SUBGROUP_ROWS = 0;
layout(constant_id = 2) const uint BIAS = 1;       // the forward adds beta (0: none given)
#include "rows.glsl"

layout(push_constant) uniform Push {
    Floats x; Floats gamma; Floats beta; Floats g; Floats out_; Floats mean; Floats rstd;
    uint rows; uint n; float eps;
} p;

// The sum of v over the row's threads (every thread of them gets it).
float row_sum(float v) {
    return SUBGROUP_ROWS != 0 ? subgroupAdd(v) : wg_sum(v);
}

void main() {
    bool sub = SUBGROUP_ROWS != 0;
    uint lane = sub ? gl_SubgroupInvocationID : gl_LocalInvocationID.x;
    uint width = sub ? gl_SubgroupSize : WG;
    uint first = sub ? gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID : gl_WorkGroupID.x;
    uint step = sub ? gl_NumWorkGroups.x * gl_NumSubgroups : gl_NumWorkGroups.x;
    float inv_n = 1.0 / float(p.n);
    for (uint r = first; r < p.rows; r += step) {
        uint base = r * p.n;
        if (BACKWARD == 0) {
            float s = 0.0;
            for (uint j = lane; j < p.n; j += width) s += p.x.v[base + j];
            float mu = row_sum(s) / float(p.n);
            float v = 0.0;
            for (uint j = lane; j < p.n; j += width) {
                float d = p.x.v[base + j] - mu;
                v += d * d;
            }
            float rs = 1.0 / sqrt(row_sum(v) / float(p.n) + p.eps);
            if (lane == 0) { p.mean.v[r] = mu; p.rstd.v[r] = rs; }
            for (uint j = lane; j < p.n; j += width) {
                float y = (p.x.v[base + j] - mu) * rs * p.gamma.v[j];
                p.out_.v[base + j] = BIAS != 0 ? y + p.beta.v[j] : y;
            }
        } else {
            float mu = p.mean.v[r], rs = p.rstd.v[r];
            float a = 0.0, b = 0.0;
            for (uint j = lane; j < p.n; j += width) {
                float dxhat = p.g.v[base + j] * p.gamma.v[j];
                a += dxhat;
                b += dxhat * (p.x.v[base + j] - mu) * rs;
            }
            a = row_sum(a) * inv_n;
            b = row_sum(b) * inv_n;
            for (uint j = lane; j < p.n; j += width) {
                float xhat = (p.x.v[base + j] - mu) * rs;
                p.out_.v[base + j] = rs * (p.g.v[base + j] * p.gamma.v[j] - a - xhat * b);
            }
        }
    }
}
