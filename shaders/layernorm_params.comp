#version 460
// Layer-norm parameter gradients: dgamma[j] = sum_r g[r,j] * xhat[r,j] and
// dbeta[j] = sum_r g[r,j], one thread per column summing the rows in order.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    Floats x; Floats g; Floats mean; Floats rstd; Floats dgamma; Floats dbeta;
    uint rows; uint n;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint j = gl_GlobalInvocationID.x; j < p.n; j += stride) {
        float dg = 0.0, db = 0.0;
        for (uint r = 0; r < p.rows; ++r) {
            float gv = p.g.v[r * p.n + j];
            dg += gv * (p.x.v[r * p.n + j] - p.mean.v[r]) * p.rstd.v[r];
            db += gv;
        }
        p.dgamma.v[j] = dg;
        p.dbeta.v[j] = db;
    }
}
