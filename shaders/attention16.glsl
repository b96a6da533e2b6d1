// Fused attention's operands and gradients (q, k, v, o, g, dq, dk, dv) stored in 16 bits
// where LOW says (1 float16, 2 bfloat16: pairs16.glsl), two to a word, read and written by
// element (or quad) index as float32 ones are; lse and delta stay float32. A 16-bit pair or
// quad starts at an even element, as every row does (rows of an even HEAD: attention.py).
#include "pairs16.glsl"

float load_at(Floats f, uint i) {
    if (LOW == 0u) return f.v[i];
    vec2 w = widened(uint(Ints(f).v[i >> 1]));
    return (i & 1u) != 0u ? w.y : w.x;
}

// Elements i and i + 1 (i even), rounded once where 16-bit.
void store_pair(Floats f, uint i, float a, float b) {
    if (LOW == 0u) {
        f.v[i] = a;
        f.v[i + 1u] = b;
    } else {
        Ints(f).v[i >> 1] = int(narrowed(vec2(a, b)));
    }
}

// Elements 4q to 4q + 3.
vec4 load_quad(Floats f, uint q) {
    if (LOW == 0u) return Quads(f).v[q];
    return vec4(widened(uint(Ints(f).v[2u * q])), widened(uint(Ints(f).v[2u * q + 1u])));
}

void store_quad(Floats f, uint q, vec4 x) {
    if (LOW == 0u) {
        Quads(f).v[q] = x;
    } else {
        Ints(f).v[2u * q] = int(narrowed(x.xy));
        Ints(f).v[2u * q + 1u] = int(narrowed(x.zw));
    }
}
