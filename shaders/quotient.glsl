// x / y. A device may divide through the reciprocal, which flushes 1/|y| to 0 past 2^126
// (the precision SPIR-V's division promises ends there): such a y is scaled down first.
float quotient(float x, float y) {
    const float huge = uintBitsToFloat(0x7E800000u);      // 2^126
    return abs(y) > huge && !isinf(y) ? (x * 0.25) / (y * 0.25) : x / y;
}
