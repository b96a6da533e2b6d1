// Shared by every kernel: buffer references, numerics helpers, Philox. (Op codes are in
// opcodes.glsl, generated from dualgrad/kernel_ops.py.)
//
// Storage is addressed through buffer device addresses passed in push constants, so a
// dispatch needs no descriptor set: bind pipeline, push constants, dispatch.
#extension GL_EXT_buffer_reference : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };
// The same storage read four floats at a time (one 16-byte load); every buffer address is
// 16-byte aligned (the pools allocate in 256-byte units), so element 4q starts quad q.
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Quads { vec4 v[]; };

const uint WG = 256;             // threads per workgroup of the 1-D kernels

float f_inf() { return uintBitsToFloat(0x7f800000u); }
float f_nan() { return uintBitsToFloat(0x7fc00000u); }
bool signbit_f(float x) { return (floatBitsToUint(x) & 0x80000000u) != 0u; }

// tanh to a few ULP everywhere (GLSL's is only specified through sinh/cosh, which loses
// all relative accuracy near 0): a Taylor polynomial below 0.4, else (1 - e)/(1 + e) with
// e = exp(-2|x|) in (0, 0.45], where nothing cancels.
float tanh_f(float x) {
    float ax = abs(x);
    float r;
    if (ax < 0.4) {
        float x2 = ax * ax;
        r = ax + ax * x2 * (-0.33333333333 + x2 * (0.13333333333 + x2 * (-0.053968253968
              + x2 * (0.021869488536 + x2 * (-0.0088632355299 + x2 * 0.0035921280366)))));
    } else {
        float e = exp(-2.0 * ax);
        r = (1.0 - e) / (1.0 + e);
    }
    return x < 0.0 ? -r : (x > 0.0 ? r : x);   // keeps the sign of zero and NaN
}

float sigmoid_f(float x) {
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    float e = exp(x);
    return e / (1.0 + e);
}

// Numerical Recipes' Chebyshev fit of erfc: erfc(z) = t exp(-z^2 + erfc_fit(t)) for z >= 0,
// t = 1 / (1 + z/2), with a fractional error below 1.2e-7 for every z >= 0.
float erfc_fit(float t) {
    return -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
           + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
           + t * (-0.82215223 + t * 0.17087277))))))));
}

// The rounding error of x^2 (x^2 = sq + lo exactly, by an fma): exp(-x^2) is then
// exp(-sq) (1 - lo), so only exp's own error grows with x.
float square_lo(float x, float sq) {
    return isinf(sq) ? 0.0 : fma(x, x, -sq);             // inf - inf would be NaN
}

// Phi(x) = erfc(-x / sqrt 2) / 2 by the fit above, so the CDF keeps its relative accuracy
// deep in the lower tail, where 1 + erf(x) would cancel to nothing. z^2 = x^2 / 2 is formed
// exactly from x^2 as sq + lo.
float normal_cdf(float x) {
    float az = abs(x) * 0.70710678118654752;
    float t = 1.0 / (1.0 + 0.5 * az);
    float sq = x * x;
    float erfc_az = t * exp(erfc_fit(t) - 0.5 * sq) * (1.0 - 0.5 * square_lo(x, sq));
    return x <= 0.0 ? 0.5 * erfc_az : 1.0 - 0.5 * erfc_az;
}

float normal_pdf(float x) { return 0.3989422804014327 * exp(-0.5 * x * x); }

// pow with C's special cases (GLSL's pow is undefined for x < 0 and for x = 0, y <= 0).
// Exponents 1, 2, 0.5 and -1 are computed exactly as the operation they are.
float pow_c(float x, float y) {
    if (y == 0.0 || x == 1.0) return 1.0;
    if (isnan(x) || isnan(y)) return f_nan();
    if (y == 1.0) return x;
    if (y == 2.0) return x * x;
    if (y == 0.5 && x >= 0.0 && !isinf(x)) return sqrt(x);
    if (y == -1.0) return 1.0 / x;
    bool y_int = floor(y) == y;
    bool y_odd = y_int && abs(y) < 16777216.0 && mod(y, 2.0) == 1.0;
    if (x == -1.0 && isinf(y)) return 1.0;
    if (isinf(x) && x < 0.0) {
        float r = y > 0.0 ? f_inf() : 0.0;
        return y_odd ? -r : r;
    }
    if (x == 0.0) {
        float r = y > 0.0 ? 0.0 : f_inf();
        return (y_odd && signbit_f(x)) ? -r : r;
    }
    if (x < 0.0) {
        if (!y_int) return f_nan();
        float r = exp2(y * log2(-x));
        return y_odd ? -r : r;
    }
    return exp2(y * log2(x));
}

// Philox4x32-10 (Salmon et al., 2011): counter c, key k; the same rounds as
// dualgrad/cpu/dropout.py.
uvec4 philox4x32(uvec4 c, uvec2 k) {
    for (int i = 0; i < 10; ++i) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}
