#version 460
// C = op(A) @ op(B), batched over gl_WorkGroupID.z, full float32. Operands are read
// through element strides (a_sm, a_sk), (b_sk, b_sn), so a transposed operand is read in
// place; a batch stride of 0 shares a 2-D operand across the batch.
// A 16x16 workgroup computes a 64x64 tile of C, each thread a 4x4 block, stepping K by 16
// through shared memory.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 16, local_size_y = 16) in;

layout(push_constant) uniform Push {
    Floats a; Floats b; Floats c;
    uint M; uint N; uint K; uint a_sm; uint a_sk; uint b_sk; uint b_sn;
    uint a_bs; uint b_bs; uint c_bs;
} p;

const uint TM = 64, TN = 64, TK = 16;
shared float As[TK][TM + 1];
shared float Bs[TK][TN + 1];

void main() {
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint tid = ty * 16 + tx;
    uint m0 = gl_WorkGroupID.y * TM, n0 = gl_WorkGroupID.x * TN;
    uint batch = gl_WorkGroupID.z;
    uint a_base = batch * p.a_bs, b_base = batch * p.b_bs;
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < p.K; k0 += TK) {
        for (uint e = tid; e < TM * TK; e += 256) {      // A tile: TM x TK
            uint mm = e / TK, kk = e % TK;
            uint m = m0 + mm, k = k0 + kk;
            As[kk][mm] = (m < p.M && k < p.K) ? p.a.v[a_base + m * p.a_sm + k * p.a_sk] : 0.0;
        }
        for (uint e = tid; e < TK * TN; e += 256) {      // B tile: TK x TN
            uint kk = e / TN, nn = e % TN;
            uint k = k0 + kk, n = n0 + nn;
            Bs[kk][nn] = (k < p.K && n < p.N) ? p.b.v[b_base + k * p.b_sk + n * p.b_sn] : 0.0;
        }
        barrier();
        for (uint kk = 0; kk < TK; ++kk) {
            float av[4], bv[4];
            for (int i = 0; i < 4; ++i) av[i] = As[kk][ty * 4 + i];
            for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx * 4 + j];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier();
    }
    uint c_base = batch * p.c_bs;
    for (int i = 0; i < 4; ++i) {
        uint m = m0 + ty * 4 + i;
        if (m >= p.M) continue;
        for (int j = 0; j < 4; ++j) {
            uint n = n0 + tx * 4 + j;
            if (n < p.N) p.c.v[c_base + m * p.N + n] = acc[i][j];
        }
    }
}
