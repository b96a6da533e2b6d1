// float32 <-> the 16-bit float types, in integer arithmetic on the bits (no device's
// flushing of subnormals can touch it): to_half and to_bf16 round to nearest even (past
// float16's largest finite value to inf, subnormal results kept, NaN stays NaN with its
// sign), from_half is exact (a bfloat16 widens by a shift). For convert16.comp and the
// kernels that read or write 16-bit storage (matmul, split_bf16, pairs16.glsl).

uint to_half(uint u) {
    uint sign = (u >> 16) & 0x8000u;
    uint a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);   // NaN, quiet
    if (a >= 0x477ff000u) return sign | 0x7c00u;   // 65520 and up (ties to even) -> inf
    if (a >= 0x38800000u) {                        // a normal half: 2^-14 and up
        uint r = a - 0x38000000u;                  // the exponent's bias 127 -> 15
        r += 0x0fffu + ((r >> 13) & 1u);           // (a carry moves into the exponent)
        return sign | (r >> 13);
    }
    if (a <= 0x33000000u) return sign;             // 2^-25 and below -> zero (2^-25: a tie)
    uint e = a >> 23;                              // a subnormal half: k units of 2^-24
    uint m = (a & 0x7fffffu) | 0x800000u;
    uint s = 126u - e;                             // k = m / 2^s, s in [14, 24]
    uint k = m >> s;
    uint rem = m & ((1u << s) - 1u);
    uint tie = 1u << (s - 1u);
    if (rem > tie || (rem == tie && (k & 1u) != 0u)) k += 1u;
    return sign | k;                               // (k = 0x400: the smallest normal)
}

uint to_bf16(uint u) {
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;        // NaN, quiet
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

uint from_half(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    if (e == 31u) return sign | 0x7f800000u | (m << 13);
    if (e != 0u) return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0u) return sign;
    uint b = uint(findMSB(m));                     // m 2^-24 = 2^(b - 24) (1.f)
    return sign | ((b + 103u) << 23) | ((m << (23u - b)) & 0x7fffffu);
}

// The same for the type of code `low` (1 float16, 2 bfloat16; a constant in the callers,
// so the compiler keeps one branch): u's bits rounded to it, a 16-bit element h widened,
// and u rounded to it and widened back (float32 bits).
uint narrow16(uint u, uint low) { return low == 1u ? to_half(u) : to_bf16(u); }

float widen16(uint h, uint low) { return uintBitsToFloat(low == 1u ? from_half(h) : h << 16); }

uint round16(uint u, uint low) { return low == 1u ? from_half(to_half(u)) : to_bf16(u) << 16; }
