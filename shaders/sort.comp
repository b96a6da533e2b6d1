#version 460
// Sorting the rows of a (rows, n) tensor: the order (indices) and the values; the twin of
// dualgrad/cpu/sort.py. Each element becomes a key pair (k, i): k its value's bits as an
// unsigned integer in the values' order (-0 as +0, every NaN past +inf; complemented for a
// descending sort), i its index in the row. The pairs are all distinct, so sorting them is
// one exact answer on any device: ties keep the order of the indices (a stable sort).
//
// A bitonic sort over rows padded to P (a power of two) with pairs that sort last. The
// padded rows lie end to end in (keys, idx); a compare-exchange of stage k and distance j
// orders elements i and i + j (i & j == 0) ascending when (i mod P) & k == 0. Two modes:
//   LOCAL  a workgroup a block of BLOCK elements in shared memory: stages kfirst..klast,
//          each with the distances below BLOCK; FIRST: the pairs are made from x; LAST:
//          the sorted rows are written out, the values moved as bits from x.
//   GLOBAL one compare-exchange of (k, j) with j >= BLOCK, a thread a pair.
// TYPE 0: float32 values, 1: int32.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint TYPE = 0;
const uint BLOCK = 2048u;       // elements a workgroup sorts in shared memory (16 KiB)

const uint LOCAL = 0u, GLOBAL = 1u;
const uint FIRST = 1u, LAST = 2u, DESCENDING = 4u;
const uint PAD = 0xFFFFFFFFu;

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Uints { uint v[]; };

layout(push_constant) uniform Push {
    Uints x; Uints keys; Uints idx; Uints vals; Uints order;
    uint total; uint n; uint padded; uint kfirst; uint klast; uint j; uint flags;
} p;

shared uint skey[BLOCK];
shared uint sidx[BLOCK];

uint key_of(uint bits) {
    uint k;
    if (TYPE == 1u) {
        k = bits ^ 0x80000000u;
    } else if ((bits & 0x7fffffffu) > 0x7f800000u) {
        k = PAD;                                            // NaN: past +inf
    } else {
        if (bits == 0x80000000u) bits = 0u;                 // -0 as +0
        k = (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
    }
    return (p.flags & DESCENDING) != 0u ? ~k : k;
}

// (ka, ia) after (kb, ib)
bool after(uint ka, uint ia, uint kb, uint ib) { return ka != kb ? ka > kb : ia > ib; }

// Element t of the padded rows as its pair, from x.
void made(uint t, out uint k, out uint i) {
    uint row = t / p.padded;
    i = t % p.padded;
    if (i < p.n) {
        k = key_of(p.x.v[row * p.n + i]);
    } else {
        k = PAD;
        i = PAD;
    }
}

void store(uint t, uint k, uint i) {
    if ((p.flags & LAST) == 0u) {
        p.keys.v[t] = k;
        p.idx.v[t] = i;
        return;
    }
    uint row = t / p.padded, at = t % p.padded;
    if (at < p.n) {
        p.vals.v[row * p.n + at] = p.x.v[row * p.n + i];
        p.order.v[row * p.n + at] = i;
    }
}

bool ascending(uint i, uint k) { return ((i & (p.padded - 1u)) & k) == 0u; }

// The lower element of compare-exchange pair q at distance j.
uint lower(uint q, uint j) { return ((q & ~(j - 1u)) << 1) | (q & (j - 1u)); }

void local_block(uint base) {
    uint lid = gl_LocalInvocationID.x;
    for (uint e = lid; e < BLOCK; e += WG) {
        uint t = base + e;
        if (t >= p.total) break;
        uint k, i;
        if ((p.flags & FIRST) != 0u) {
            made(t, k, i);
        } else {
            k = p.keys.v[t];
            i = p.idx.v[t];
        }
        skey[e] = k;
        sidx[e] = i;
    }
    barrier();
    for (uint k = p.kfirst; k <= p.klast; k <<= 1) {
        for (uint j = min(k, BLOCK) >> 1; j > 0u; j >>= 1) {
            for (uint q = lid; q < BLOCK / 2u; q += WG) {
                uint a = lower(q, j), b = a | j;
                if (base + b >= p.total) continue;
                uint ka = skey[a], ia = sidx[a], kb = skey[b], ib = sidx[b];
                if (after(ka, ia, kb, ib) == ascending(base + a, k)) {
                    skey[a] = kb; sidx[a] = ib;
                    skey[b] = ka; sidx[b] = ia;
                }
            }
            barrier();
        }
    }
    for (uint e = lid; e < BLOCK; e += WG) {
        uint t = base + e;
        if (t >= p.total) break;
        store(t, skey[e], sidx[e]);
    }
    barrier();
}

void main() {
    if (MODE == LOCAL) {
        for (uint b = gl_WorkGroupID.x; b * BLOCK < p.total; b += gl_NumWorkGroups.x)
            local_block(b * BLOCK);
        return;
    }
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint q = gl_GlobalInvocationID.x; q < p.total / 2u; q += stride) {
        uint a = lower(q, p.j), b = a | p.j;
        uint ka = p.keys.v[a], ia = p.idx.v[a], kb = p.keys.v[b], ib = p.idx.v[b];
        if (after(ka, ia, kb, ib) == ascending(a, p.kfirst)) {
            p.keys.v[a] = kb; p.idx.v[a] = ib;
            p.keys.v[b] = ka; p.idx.v[b] = ia;
        }
    }
}
