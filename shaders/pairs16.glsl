// Two 16-bit elements of a word widened to float32, and two float32 results rounded into
// one word (round16.glsl), for kernels with a specialization constant LOW: 1 float16,
// 2 bfloat16 (matmul.glsl's ROUND16 codes).
#include "round16.glsl"

vec2 widened(uint word) {
    return vec2(widen16(word & 0xffffu, LOW), widen16(word >> 16, LOW));
}

uint narrowed(vec2 v) {
    uvec2 u = floatBitsToUint(v);
    return narrow16(u.x, LOW) | (narrow16(u.y, LOW) << 16);
}
