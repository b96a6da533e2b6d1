// The body of scan.comp (SCALAR float, VALUES Floats) and intscan.comp (SCALAR int,
// VALUES Ints): see scan.comp for the modes. PRODUCT: products in place of sums (cumprod),
// the "sums" and "totals" below then products. Int32 sums and products wrap and are exact
// in any order.
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;
layout(constant_id = 1) const uint RUN = 16;    // elements a thread scans in a tile
layout(constant_id = 2) const uint PRODUCT = 0;
// Tiles a TOTALS workgroup sums at once: their loads in flight together, and one count (an
// atomic whose answer the workgroup waits for) for them all.
const uint GROUP = 4u;

const SCALAR IDENTITY = PRODUCT != 0u ? SCALAR(1) : SCALAR(0);

SCALAR combine(SCALAR a, SCALAR b) { return PRODUCT != 0u ? a * b : a + b; }

SCALAR subgroup_combine(SCALAR s) { return PRODUCT != 0u ? subgroupMul(s) : subgroupAdd(s); }

SCALAR subgroup_before(SCALAR s) {
    return PRODUCT != 0u ? subgroupExclusiveMul(s) : subgroupExclusiveAdd(s);
}

// Totals another workgroup reads back within the dispatch: coherent, as in reduce.comp.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Totals {
    SCALAR v[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Counters { uint v[]; };

layout(push_constant) uniform Push {
    VALUES x; VALUES out0; Totals totals; Counters counters;
    uint lines; uint n; uint inner; uint tiles; uint reverse;
} p;

const uint TILE = RUN * WG;
shared SCALAR part[WG];
shared bool last_tile;
// The tile, an element of padding after every 32 so that threads reading their runs (RUN
// apart) fall in different banks.
shared SCALAR tile_[TILE + TILE / 32u];

uint padded(uint e) { return e + e / 32u; }

void columns() {
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint t = gl_GlobalInvocationID.x; t < p.lines; t += stride) {
        uint o = t / p.inner, k = t % p.inner, base = o * p.n * p.inner + k;
        SCALAR acc = IDENTITY;
        for (uint j = 0; j < p.n; ++j) {
            uint i = base + (p.reverse != 0u ? p.n - 1u - j : j) * p.inner;
            acc = combine(acc, p.x.v[i]);
            p.out0.v[i] = acc;
        }
    }
}

// Where logical element j of the line at base is.
uint at(uint base, uint j) { return base + (p.reverse != 0u ? p.n - 1u - j : j); }

// The sum of the values of the threads before this one: within the subgroup by its scan,
// plus the totals of the subgroups before, added in order.
SCALAR workgroup_before(SCALAR s) {
    SCALAR inside = subgroup_before(s);
    if (gl_SubgroupInvocationID == gl_SubgroupSize - 1u)
        part[gl_SubgroupID] = combine(inside, s);
    barrier();
    SCALAR before = IDENTITY;
    for (uint k = 0u; k < gl_SubgroupID; ++k) before = combine(before, part[k]);
    barrier();
    return combine(before, inside);
}

// tile_'s TILE values, in place, to their running sums from `carry` (inclusive: each
// value's own included; else the sums before each); returns carry plus all of them. Each
// thread adds a run of RUN, the workgroup scans the runs' totals.
SCALAR scan_tile(uint lid, SCALAR carry, bool inclusive) {
    barrier();                                    // tile_ is filled
    SCALAR v[RUN];
    [[unroll]] for (uint i = 0u; i < RUN; ++i) v[i] = tile_[padded(lid * RUN + i)];
    SCALAR run = IDENTITY;
    [[unroll]] for (uint i = 0u; i < RUN; ++i) run = combine(run, v[i]);
    SCALAR before = combine(carry, workgroup_before(run));
    [[unroll]] for (uint i = 0u; i < RUN; ++i) {
        SCALAR next = combine(before, v[i]);
        tile_[padded(lid * RUN + i)] = inclusive ? next : before;
        before = next;
    }
    if (lid == WG - 1u) part[0] = before;
    barrier();
    SCALAR end = part[0];
    barrier();
    return end;
}

// The last tile of a line to count in: totals[line * tiles + t] becomes the sum of the
// tiles before t, TILE of them at a time through shared memory.
void prefix_totals(uint line, uint lid) {
    memoryBarrierBuffer();
    uint base = line * p.tiles;
    SCALAR carry = IDENTITY;
    for (uint first = 0u; first < p.tiles; first += TILE) {
        [[unroll]] for (uint i = 0u; i < RUN; ++i) {
            uint t = first + i * WG + lid;
            tile_[padded(i * WG + lid)] = t < p.tiles ? p.totals.v[base + t] : IDENTITY;
        }
        carry = scan_tile(lid, carry, false);
        [[unroll]] for (uint i = 0u; i < RUN; ++i) {
            uint t = first + i * WG + lid;
            if (t < p.tiles) p.totals.v[base + t] = tile_[padded(i * WG + lid)];
        }
        barrier();                                // tile_ is read before it is refilled
    }
    if (lid == 0u) p.counters.v[line] = 0u;
}

// TOTALS: tiles c to c + GROUP - 1 (those of them before p.tiles): each tile's total, then
// one count for them all; the last workgroup of its line to count in prefixes the totals.
void totals(uint line, uint c) {
    uint lid = gl_LocalInvocationID.x, base = line * p.n, count = min(GROUP, p.tiles - c);
    SCALAR s[GROUP];
    [[unroll]] for (uint g = 0u; g < GROUP; ++g) {
        s[g] = IDENTITY;
        [[unroll]] for (uint i = 0u; i < RUN; ++i) {
            uint j = (c + g) * TILE + i * WG + lid;
            s[g] = combine(s[g], j < p.n ? p.x.v[at(base, j)] : IDENTITY);
        }
    }
    // The tiles' subgroup sums into tile_ (free until a prefix), added in order by thread 0:
    // one barrier for the GROUP tiles, where a sum each took two (and the same sums).
    uint subgroups = gl_NumSubgroups;
    [[unroll]] for (uint g = 0u; g < GROUP; ++g) {
        SCALAR part_sum = subgroup_combine(s[g]);
        if (subgroupElect()) tile_[g * subgroups + gl_SubgroupID] = part_sum;
    }
    barrier();
    if (lid == 0u) {
        for (uint g = 0u; g < count; ++g) {
            SCALAR total = IDENTITY;
            for (uint k = 0u; k < subgroups; ++k)
                total = combine(total, tile_[g * subgroups + k]);
            p.totals.v[line * p.tiles + c + g] = total;
        }
        memoryBarrierBuffer();
        last_tile = atomicAdd(p.counters.v[line], count) == p.tiles - count;
    }
    barrier();
    if (last_tile) prefix_totals(line, lid);
    barrier();                      // last_tile is read before the next group sets it
}

void tile(uint line, uint c) {
    uint lid = gl_LocalInvocationID.x, base = line * p.n, first = c * TILE;
    SCALAR earlier = c > 0u ? p.totals.v[line * p.tiles + c] : IDENTITY;  // tiles before
    [[unroll]] for (uint i = 0u; i < RUN; ++i) {
        uint e = i * WG + lid, j = first + e;
        tile_[padded(e)] = j < p.n ? p.x.v[at(base, j)] : IDENTITY;
    }
    scan_tile(lid, earlier, true);
    [[unroll]] for (uint i = 0u; i < RUN; ++i) {
        uint e = i * WG + lid, j = first + e;
        if (j < p.n) p.out0.v[at(base, j)] = tile_[padded(e)];
    }
    barrier();                                    // (tile_ is reused by the next tile)
}

void main() {
    if (MODE == 0u) {
        columns();
        return;
    }
    // SCAN takes the tiles in the reverse of TOTALS's order: the tiles TOTALS read last are
    // the ones still in the L2 cache, so the second read of a long line starts there.
    for (uint line = gl_WorkGroupID.y; line < p.lines; line += gl_NumWorkGroups.y) {
        if (MODE == 1u) {
            uint step = gl_NumWorkGroups.x * GROUP;
            for (uint c = gl_WorkGroupID.x * GROUP; c < p.tiles; c += step) totals(line, c);
        } else {
            for (uint c = gl_WorkGroupID.x; c < p.tiles; c += gl_NumWorkGroups.x)
                tile(p.lines - 1u - line, p.tiles - 1u - c);
        }
    }
}
