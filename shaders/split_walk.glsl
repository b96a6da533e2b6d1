// How split_bf16.comp and split_f16.comp walk an operand of a product: by 16-byte words of
// 8 values where it is stored k-major, else transposed through shared memory by blocks.
// Each 8 consecutive values of the k-major result go to the including shader's
// store_split(operand, pieces, plane, w, v), w their word in a piece plane. It needs
// LOW16 (the 16-bit type float32 values are rounded to as they are read, 0: none).

// A float32 value as the product takes it (rounded to LOW16's type where there is one), or
// a 16-bit one widened.
float taken(float x) {
    return LOW16 == 0u ? x : uintBitsToFloat(round16(floatBitsToUint(x), LOW16));
}

float widened(uint h) { return widen16(h, LOW16); }

// Element i of the operand x (16-bit storage where `narrow`).
float element(Floats x, uint i, bool narrow) {
    if (!narrow) return taken(x.v[i]);
    uint w = uint(Ints(x).v[i >> 1]);
    return widened((i & 1u) != 0u ? w >> 16 : w & 0xffffu);
}

// TRANSPOSE: a workgroup takes a block of TR values of r by TK of k.
const uint TR = 64, TK = 32;
shared float block[TK][TR + 1];                   // [k][r]; the +1 spreads a column's banks

// One operand, by its workgroup g of the n that walk it: words of 8 values, or blocks of
// TR x TK, in strides of n. (The backend caps n at half the 65535 workgroups a dimension
// every device allows.) The loops' bounds are the same across the workgroup, so its
// barriers stay uniform.
void split(uint operand, Floats x, Words pieces, uint R, uint K, uint plane, bool transpose,
           bool narrow, uint g, uint n) {
    uint lid = gl_LocalInvocationID.x;
    if (!transpose) {
        for (uint w = g * 256 + lid; w < plane / 8; w += n * 256) {
            float v[8];
            if (narrow) {                                    // 8 values: one 16-byte word
                uvec4 h = Words(x).v[w];
                [[unroll]] for (uint i = 0; i < 4; ++i) {
                    v[2 * i] = widened(h[i] & 0xffffu);
                    v[2 * i + 1] = widened(h[i] >> 16);
                }
            } else {
                vec4 lo = Quads(x).v[2 * w], hi = Quads(x).v[2 * w + 1];
                v = float[8](taken(lo.x), taken(lo.y), taken(lo.z), taken(lo.w),
                             taken(hi.x), taken(hi.y), taken(hi.z), taken(hi.w));
            }
            store_split(operand, pieces, plane, w, v);
        }
        return;
    }
    uint rows = (R + TR - 1) / TR, cols = (K + TK - 1) / TK;   // blocks of r, of k
    uint blocks = rows * cols * (plane / (R * K));
    uint k = lid / (TR / 8), r = (lid % (TR / 8)) * 8;          // what the thread writes
    for (uint blk = g; blk < blocks; blk += n) {
        uint r0 = (blk % rows) * TR, k0 = (blk / rows % cols) * TK, batch = blk / (rows * cols);
        [[unroll]] for (uint i = 0; i < TR * TK / 256; ++i) {       // reads along k
            uint e = lid + i * 256, re = r0 + e / TK, ke = k0 + e % TK;
            block[e % TK][e / TK] = re < R && ke < K ? element(x, (batch * R + re) * K + ke,
                                                               narrow) : 0.0;
        }
        barrier();
        if (k0 + k < K && r0 + r < R) {                              // writes along r
            float v[8];
            [[unroll]] for (uint i = 0; i < 8; ++i) v[i] = block[k][r + i];
            store_split(operand, pieces, plane, ((batch * K + k0 + k) * R + r0 + r) / 8, v);
        }
        barrier();                                                   // block is free again
    }
}
