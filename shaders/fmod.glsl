// fmod, remainder and floor division of float32s (PyTorch's fmod, remainder and
// floor_divide), exact from the bits on any device, subnormals too; and the quotients their
// gradients use. Needs common.glsl and atan.glsl (split_mag, scale2).
//
// |x| = q |y| + r is long division of the integer significands: |x| = mx 2^(ex - 150) and
// |y| = my 2^(ey - 150) (ex, ey the biased exponents, 1 for a subnormal), so r, a multiple
// of 2^(ey - 150) below |y|, is (mx 2^(ex - ey)) mod my, up to 8 bits of the exponent
// difference a step; q is kept while it fits in 32 bits.

const uint F_INF_BITS = 0x7f800000u, F_SIGN = 0x80000000u;

struct Division { uint r; uint q; bool q_exact; };

uint significand(uint b) { return (b & 0x7fffffu) | (b >= 0x800000u ? 0x800000u : 0u); }
uint biased_exponent(uint b) { return max(b >> 23, 1u); }

// |x| / |y| for magnitudes' bits 0 < by <= bx < inf.
Division divide(uint bx, uint by) {
    uint my = significand(by), mx = significand(bx);
    uint d = biased_exponent(bx) - biased_exponent(by);
    // (normal numbers' significands are in [2^23, 2^24): their quotient is 0 or 1)
    uint q0 = mx >= 0x800000u && my >= 0x800000u ? uint(mx >= my) : mx / my;
    Division v = Division(mx - q0 * my, q0, true);
    float inv_my = 1.0 / float(my);
    while (d > 0u) {
        uint s = min(d, 8u);
        if (v.q >= (1u << 23)) v.q_exact = false;     // (q << 8 + 255 stays below 2^31)
        v.r <<= s;
        // The step's quotient (below 2^8) from a float estimate whose error is far below
        // 1, set right by one correction: cheaper than an integer division.
        uint qs = uint(float(v.r) * inv_my);
        int left = int(v.r - qs * my);
        if (left < 0) { qs -= 1u; left += int(my); }
        else if (left >= int(my)) { qs += 1u; left -= int(my); }
        v.q = (v.q << s) + qs;
        v.r = uint(left);
        d -= s;
    }
    return v;
}

// r 2^(ey - 150) as float bits, r < 2^24: exact (a normal number, or a subnormal below).
uint scaled_bits(uint r, uint ey) {
    if (r == 0u) return 0u;
    int shift = 23 - findMSB(r);
    int e = int(ey) - shift;
    if (e >= 1) return (uint(e) << 23) | ((r << uint(shift)) & 0x7fffffu);
    return r << (ey - 1u);
}

// x - trunc(x / y) y, as C's fmod: NaN where x is infinite or y is 0.
float fmod_f(float x, float y) {
    uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
    uint bx = ux & ~F_SIGN, by = uy & ~F_SIGN;
    if (bx >= F_INF_BITS || by > F_INF_BITS || by == 0u) return f_nan();
    if (by == F_INF_BITS || bx < by) return x;
    Division v = divide(bx, by);
    return uintBitsToFloat((ux & F_SIGN) | scaled_bits(v.r, biased_exponent(by)));
}

// fmod, then + y where it is nonzero and its sign is not y's: the sign of y, as Python's
// and PyTorch's remainder. Past |x| >= |y| the sum is |y| - r, exact in the same units;
// below, y + x is one rounding of significands: a result below the normal range is exact
// (a multiple of 2^-149 below 2^-126), so it is written as its integer count of 2^-149.
// (One long division on every path: threads of a workgroup do not wait on two.)
float remainder_f(float x, float y) {
    uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
    uint bx = ux & ~F_SIGN, by = uy & ~F_SIGN;
    if (bx >= F_INF_BITS || by > F_INF_BITS || by == 0u) return f_nan();
    bool differ = (ux & F_SIGN) != (uy & F_SIGN);
    if (bx == 0u || (bx < by && !differ) || by == F_INF_BITS) {
        return (bx == 0u || !differ) ? x : y;
    }
    if (bx < by && by >= 0x0c800000u && bx >= 0x00800000u) {
        // |y| >= 2^-102 and x normal: y + x is normal (a multiple of at least 2^-126), so
        // the device's addition is exact-rounded, with nothing flushed
        return y + x;
    }
    if (bx < by) {
        int ex, ey;
        float mx = split_mag(x, ex), my = split_mag(y, ey);
        float d = my - scale2(mx, ex - ey);             // |y| - |x| over 2^ey, in (0, 2)
        float units = scale2(d, ey + 149);
        uint mag = units < 8388608.0 ? uint(units) : floatBitsToUint(scale2(d, ey));
        return uintBitsToFloat((uy & F_SIGN) | mag);
    }
    Division v = divide(bx, by);
    uint sign = ux & F_SIGN, r = v.r;
    if (r != 0u && differ) {
        r = significand(by) - r;
        sign = uy & F_SIGN;
    }
    return uintBitsToFloat(sign | scaled_bits(r, biased_exponent(by)));
}

// g times the quotient of |x| / |y| (finite, 0 < |y| <= |x|) truncated, plus one if
// ``up`` and r is not 0: the quotient exact while it fits in 32 bits (rounded once to
// float32), else the quotient of the significands (a 2.5 ULP division; the integer part is
// then all there is), scaled with g's exponent so that a product in range is not lost to
// an overflowing quotient.
float times_quotient(float g, float x, float y, bool up) {
    uint bx = floatBitsToUint(x) & ~F_SIGN, by = floatBitsToUint(y) & ~F_SIGN;
    Division v = divide(bx, by);
    if (v.q_exact) return g * float(v.q + (up && v.r != 0u ? 1u : 0u));
    if (isinf(g) || isnan(g) || g == 0.0) return g;     // (times a positive quotient)
    int ex, ey, eg;
    float mx = split_mag(x, ex), my = split_mag(y, ey), mg = split_mag(g, eg);
    float q = scale2(mg * (mx / my), eg + ex - ey);
    return signbit_f(g) ? -q : q;
}

// g trunc(x / y) (fmod's gradient is -g trunc(x / y)) or, ``floored``, g times PyTorch's
// floor_divide: the quotient rounded toward -inf, x / y where y is 0, NaN where x is
// infinite (floored), a zero signed as x / y.
float times_integer_quotient(float g, float x, float y, bool floored) {
    uint ux = floatBitsToUint(x), uy = floatBitsToUint(y);
    uint bx = ux & ~F_SIGN, by = uy & ~F_SIGN;
    uint sign = (ux ^ uy) & F_SIGN;
    float special;
    if (bx > F_INF_BITS || by > F_INF_BITS) {
        special = f_nan();
    } else if (by == 0u) {
        special = bx == 0u ? f_nan() : uintBitsToFloat(sign | F_INF_BITS);
    } else if (bx == F_INF_BITS) {
        special = (floored || by == F_INF_BITS) ? f_nan() : uintBitsToFloat(sign | F_INF_BITS);
    } else if (by == F_INF_BITS || bx < by) {
        special = (floored && sign != 0u && bx != 0u) ? -1.0 : uintBitsToFloat(sign);
    } else {
        float p = times_quotient(g, x, y, floored && sign != 0u);
        return sign != 0u ? -p : p;
    }
    return g * special;
}

float integer_quotient(float x, float y, bool floored) {
    return times_integer_quotient(1.0, x, y, floored);
}
