// What both matmul kernels share: their push constants and the loads of operand quads from
// global memory. The including shader declares the specialization constants BM, BN, BK,
// A_T, B_T, A_VEC and B_VEC first (matmul.comp documents them).
layout(push_constant) uniform Push {
    Floats a; Floats b; Floats c;
    uint M; uint N; uint K; uint a_sm; uint a_sk; uint b_sk; uint b_sn;
    uint a_bs; uint b_bs; uint c_bs; uint kc;
} p;

// A quad at element offset `off` of `f` with elements `step` apart, of which the first
// `valid` (0..4) are inside the matrix.
vec4 quad(Floats f, uint off, uint step, uint valid, bool vec) {
    if (vec) return valid >= 4 ? Quads(f).v[off >> 2] : vec4(0.0);
    vec4 q = vec4(0.0);
    [[unroll]] for (uint c = 0; c < 4; ++c)
        if (c < valid) q[c] = f.v[off + c * step];
    return q;
}

uint valid4(uint i, uint end) { return i < end ? min(4u, end - i) : 0u; }

// The e-th A quad of the tile at (m0, k0): A_T 0, quads along k (BK / 4 to a row of the
// tile, k fastest across threads); A_T 1, quads along m (BM / 4 to a value of k).
vec4 load_a(uint e, uint m0, uint k0, uint kend, uint base) {
    if (A_T == 0) {                             // quads along k, k fastest across threads
        uint m = m0 + e / (BK / 4), k = k0 + (e % (BK / 4)) * 4;
        return quad(p.a, base + m * p.a_sm + k * p.a_sk, p.a_sk,
                    m < p.M ? valid4(k, kend) : 0u, A_VEC != 0);
    }
    uint m = m0 + (e % (BM / 4)) * 4, k = k0 + e / (BM / 4);   // quads along m
    return quad(p.a, base + m * p.a_sm + k * p.a_sk, p.a_sm,
                k < kend ? valid4(m, p.M) : 0u, A_VEC != 0);
}

// The e-th B quad of the tile at (k0, n0): B_T 0, quads along n; B_T 1, quads along k.
vec4 load_b(uint e, uint n0, uint k0, uint kend, uint base) {
    if (B_T == 0) {                             // quads along n
        uint n = n0 + (e % (BN / 4)) * 4, k = k0 + e / (BN / 4);
        return quad(p.b, base + k * p.b_sk + n * p.b_sn, p.b_sn,
                    k < kend ? valid4(n, p.N) : 0u, B_VEC != 0);
    }
    uint n = n0 + e / (BK / 4), k = k0 + (e % (BK / 4)) * 4;    // quads along k
    return quad(p.b, base + k * p.b_sk + n * p.b_sn, p.b_sk,
                n < p.N ? valid4(k, kend) : 0u, B_VEC != 0);
}
