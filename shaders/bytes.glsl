// Bools are stored a byte each (0 or 1), four to a 32-bit word. A view of them (a part of
// a broadcast operand) may start at any byte: it is read through the word that holds its
// first byte. Results are written a whole word a thread, so no two threads of a dispatch
// write one word.
#extension GL_EXT_buffer_reference_uvec2 : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words { uint v[]; };

// The byte address ``r`` as (the word holding it, its place in that word).
Words word_of(Ints r) { uvec2 a = uvec2(r); return Words(uvec2(a.x & ~3u, a.y)); }
uint lead_of(Ints r) { return uvec2(r).x & 3u; }

// Byte i of the bools from (w, lead) on.
uint byte_at(Words w, uint lead, uint i) {
    uint k = lead + i;
    return (w.v[k >> 2] >> ((k & 3u) << 3)) & 0xffu;
}
