// Float32 values split into the three bfloat16 pieces matmul_bf16x6.comp multiplies (x =
// x0 + x1 + x2 exactly, x0 = bf16(x), x1 = bf16(x - x0), nearest even), by integer
// arithmetic alone; split_bf16.comp's docstring says which values cannot be split (they
// become x0 = NaN, x1 = x2 = 0).

// The bfloat16 nearest to x, as float32 bits (finite x below 2^63: no carry into inf).
uint bf16_bits(float x) {
    uint u = floatBitsToUint(x);
    return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

bool splittable(float x) {
    float m = abs(x);
    return m < uintBitsToFloat(0x5f000000u)                  // 2^63; NaN fails
        && (m >= uintBitsToFloat(0x0d800000u) || m == 0.0);  // 2^-100
}

// Eight consecutive values, split: words[piece] holds the piece's 8 bfloat16 values, two a
// word, an even value its word's low half.
void split8(float v[8], out uvec4 words[3]) {
    uint w[3][4];
    [[unroll]] for (uint i = 0; i < 8; ++i) {
        uint b0 = 0x7fc00000u, b1 = 0u, b2 = 0u;
        if (splittable(v[i])) {
            b0 = bf16_bits(v[i]);
            float rest = v[i] - uintBitsToFloat(b0);
            b1 = bf16_bits(rest);
            b2 = floatBitsToUint(rest - uintBitsToFloat(b1));
        }
        if ((i & 1u) == 0u) {
            w[0][i / 2] = b0 >> 16; w[1][i / 2] = b1 >> 16; w[2][i / 2] = b2 >> 16;
        } else {
            w[0][i / 2] |= b0; w[1][i / 2] |= b1; w[2][i / 2] |= b2;
        }
    }
    [[unroll]] for (uint q = 0; q < 3; ++q) words[q] = uvec4(w[q][0], w[q][1], w[q][2], w[q][3]);
}
