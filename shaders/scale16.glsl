// The power of two by which split_f16.comp scales a row of op(A) or a column of op(B) before
// it splits the values into float16 pieces, and matmul_f16x3.comp divides it out again:
// 2^s takes the largest finite |x| of the row (max_bits, its float32 bits) into [2^14,
// 2^15), where float16 holds it with room to round; a row whose largest is subnormal or
// zero is scaled as if it were 2^-126. s lies in [-113, 140].
int scale_exponent(int max_bits) {
    return 141 - max(max_bits >> 23, 1);       // 14 - (its exponent field - 127)
}

// 2^k as a float32, for k in [-126, 127].
float pow2(int k) { return uintBitsToFloat(uint(127 + k) << 23); }
