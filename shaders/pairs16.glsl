// Two 16-bit elements of a word widened to float32, and two float32 results rounded into
// one word (round16.glsl), for kernels with a specialization constant LOW: 1 float16,
// 2 bfloat16 (matmul.glsl's ROUND16 codes).
#include "round16.glsl"

vec2 widened(uint word) {
    uint lo = word & 0xffffu, hi = word >> 16;
    return LOW == 1u ? vec2(uintBitsToFloat(from_half(lo)), uintBitsToFloat(from_half(hi)))
                     : vec2(uintBitsToFloat(lo << 16), uintBitsToFloat(hi << 16));
}

uint narrowed(vec2 v) {
    uvec2 u = floatBitsToUint(v);
    return LOW == 1u ? to_half(u.x) | (to_half(u.y) << 16) : to_bf16(u.x) | (to_bf16(u.y) << 16);
}
