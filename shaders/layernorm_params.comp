#version 460
// Layer-norm parameter gradients: dgamma[j] = sum_r g[r,j] * xhat[r,j] and
// dbeta[j] = sum_r g[r,j], in two stages so that the whole device takes part (a column a
// thread over every row kept one workgroup busy): STAGE 0, a workgroup a block of 32
// columns times a chunk of rows, each of its 8 row lanes summing every 8th row of the
// chunk, the lanes then added in order: a partial sum per (chunk, column); STAGE 1, a
// thread a column adding its chunks' partials in order.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(constant_id = 0) const uint STAGE = 0;
layout(local_size_x = 256) in;

layout(push_constant) uniform Push {
    Floats x; Floats g; Floats mean; Floats rstd; Floats dgamma; Floats dbeta;
    Floats part;                  // [2][chunks][n]: dgamma's partials, then dbeta's
    uint rows; uint n; uint chunk; uint chunks;
} p;

shared float sg[256], sb[256];

void main() {
    uint lane = gl_LocalInvocationID.x;
    if (STAGE == 0u) {
        uint col = lane & 31u, row_lane = lane >> 5, c = gl_WorkGroupID.y;
        uint r1 = min((c + 1u) * p.chunk, p.rows);
        // (column blocks past the grid's, where n passes 32 * MAX_GROUPS: uniform control
        // flow, so the barriers inside are met by the whole workgroup)
        for (uint block = gl_WorkGroupID.x; block * 32u < p.n; block += gl_NumWorkGroups.x) {
            uint j = block * 32u + col;
            float dg = 0.0, db = 0.0;
            if (j < p.n) {
                for (uint r = c * p.chunk + row_lane; r < r1; r += 8u) {
                    float gv = p.g.v[r * p.n + j];
                    dg += gv * (p.x.v[r * p.n + j] - p.mean.v[r]) * p.rstd.v[r];
                    db += gv;
                }
            }
            sg[lane] = dg;
            sb[lane] = db;
            barrier();
            if (row_lane == 0u && j < p.n) {
                for (uint k = 1u; k < 8u; ++k) {
                    dg += sg[k * 32u + col];
                    db += sb[k * 32u + col];
                }
                p.part.v[c * p.n + j] = dg;
                p.part.v[(p.chunks + c) * p.n + j] = db;
            }
            barrier();                    // (the next block's lanes overwrite sg and sb)
        }
    } else {
        uint stride = gl_NumWorkGroups.x * WG;
        for (uint j = gl_GlobalInvocationID.x; j < p.n; j += stride) {
            float dg = 0.0, db = 0.0;
            for (uint c = 0u; c < p.chunks; ++c) {
                dg += p.part.v[c * p.n + j];
                db += p.part.v[(p.chunks + c) * p.n + j];
            }
            p.dgamma.v[j] = dg;
            p.dbeta.v[j] = db;
        }
    }
}
