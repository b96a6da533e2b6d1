#version 460
// Reductions: sum, mean, max, prod, min, the sums of squares and of exponentials over any
// axes, and COUNT_EQ (how many elements equal the maximum or minimum y, for their
// backward); the twin of dualgrad/cpu/reduce.py. MIN is -max(-x), bit for bit: NaN wins, -0 against +0 gives -0.
// SUM_SQUARES squares each element as it reads it (term) and adds like SUM; with CENTERED,
// (x - y[o])^2, about a center an output. SUM_EXP adds exp(x - y[o]) (a log-sum-exp's, y
// the maximum). VAR (a variance) keeps statistics of runs: a count, a mean as c + lo (lo =
// sum(d) / n of the deviations d = x - c from a center c), and M2 = sum(d^2) - sum(d) lo,
// the squares about that mean. A workgroup item's threads each walk their share once,
// centered on its first element (docs/numerics.md: why that keeps the bound); a thread's
// item sums its run, then walks it again about its float32 mean. Shares and items are
// merged by Chan's rule in a fixed order (items in order of s), and the result is M2 over
// the divisor the push constants' `total` carries (as float bits).
//
// The work is split into items: output element o, share s of its reduced elements (the
// s-th run of `chunk` of them). An item's result goes to out[s * n_out + o], so with
// SPLITS > 1 this pass leaves partial results, shape (SPLITS, n_out), that are reduced
// again (a sum of partial sums is still a float32 sum of the same terms, within the same
// gamma(n) bound): by a second small pass, or, with FINISH = 1, in this one: each item
// counts itself in at counters[o] once its partial result is written, and the item that
// counts last combines the SPLITS partial results of o, in order of s whichever item that
// is, writes final[o] and puts counters[o] back to 0 for the next dispatch. Two ways to
// run an item:
//   GROUP_ITEMS = 1  one workgroup per item: its threads take strided shares of the run
//                    (coalesced when the reduced elements are contiguous), then a tree in
//                    shared memory combines the shares;
//   GROUP_ITEMS = 0  one thread per item: it walks the run alone (coalesced across
//                    neighbouring threads when the kept elements are the contiguous ones).
// Index maps: with LAYOUT = 1 the input is [outer][count][inner] (kept, reduced, kept), so
// an element is at (o / inner * count + r) * inner + o % inner; otherwise an output's
// coordinates run over the kept dims kd (reduced dims 1) with input strides ks, and a
// reduced element's over rd (kept dims 1) with strides rs. VEC (LAYOUT 1, inner 1, count
// and chunk multiples of 4) reads the run as vec4s.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint GROUP_ITEMS = 1;
layout(constant_id = 2) const uint LAYOUT = 0;
layout(constant_id = 3) const uint VEC = 0;
layout(constant_id = 4) const uint FINISH = 0;
layout(constant_id = 5) const uint CENTERED = 0;

// Partial results another workgroup reads back within the dispatch: coherent, so neither
// their stores nor those loads stay in a cache the other workgroup does not see.
layout(buffer_reference, std430, buffer_reference_align = 4) coherent buffer Partials {
    float v[];
};
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Counters { uint v[]; };

layout(push_constant) uniform Push {
    Floats x; Floats y; Partials out_; Floats final_; Counters counters;
    uint n_out; uint count; uint splits; uint chunk; uint total; uint inner;
    uint kd[4]; uint ks[4]; uint rd[4]; uint rs[4];
} p;

shared float part[WG];
shared vec4 stats[WG];                // VAR: statistics, for the trees
shared bool last_item;

// NaN wins; -0 against +0 gives +0: the same in any order
float max_of(float acc, float v) {
    if (isnan(acc) || isnan(v)) return isnan(acc) ? acc : v;
    if (acc == v && acc == 0.0) return acc + v;
    return v > acc ? v : acc;
}

float combine(float acc, float v) {
    if (OP == MAX) return max_of(acc, v);
    if (OP == MIN) return -max_of(-acc, -v);
    if (OP == PROD) return acc * v;
    return acc + v;
}

float identity() {
    return OP == MAX ? -f_inf() : OP == MIN ? f_inf() : OP == PROD ? 1.0 : 0.0;
}

float term(float v, float target) {
    if (OP == COUNT_EQ) return v == target ? 1.0 : 0.0;
    if (OP == SUM_SQUARES) {
        float d = v - target;
        return d * d;
    }
    if (OP == SUM_EXP) return exp(v - target);
    return v;
}

uint base_of(uint o) {
    if (LAYOUT == 1) return (o / p.inner) * p.count * p.inner + o % p.inner;
    uint base = 0, rem = o;
    for (int d = 3; d >= 0; --d) {
        base += (rem % p.kd[d]) * p.ks[d];
        rem /= p.kd[d];
    }
    return base;
}

uint offset_of(uint base, uint r) {
    if (LAYOUT == 1) return base + r * p.inner;
    uint off = base, rr = r;
    for (int d = 3; d >= 0; --d) {
        off += (rr % p.rd[d]) * p.rs[d];
        rr /= p.rd[d];
    }
    return off;
}

// MAX walks a run with integer compares of the values' bits, three a value, where
// combine's NaN and zero tests cost a dozen and a branch. As signed integers the bits of
// non-negative floats order as the floats do (a positive NaN above +inf) and those of
// negative floats in reverse (-0 lowest): so the maximum is the largest bits if those are
// not negative, else the smallest (the negative value nearest zero, -0 first). A NaN is
// positive bits above +inf's or (as unsigned) negative bits above -inf's. MIN walks the
// negated values (the sign bit flipped as read) and negates the result.
struct MaxBits { int hi; int lo; uint top; };

const int NEGATE = OP == MIN ? int(0x80000000u) : 0;

MaxBits max_bits(MaxBits m, float v) {
    int b = floatBitsToInt(v) ^ NEGATE;
    return MaxBits(max(m.hi, b), min(m.lo, b), max(m.top, uint(b)));
}

float walk_max(uint base, uint r0, uint r1, uint first, uint step) {
    MaxBits m = MaxBits(int(0x80000000u), int(0xff800000u), 0u);   // -0, -inf, nothing
    if (VEC != 0) {
        for (uint r = r0 + 4 * first; r < r1; r += 4 * step) {
            vec4 q = Quads(p.x).v[(base + r) >> 2];
            m = max_bits(max_bits(max_bits(max_bits(m, q.x), q.y), q.z), q.w);
        }
    } else {
        for (uint r = r0 + first; r < r1; r += step)
            m = max_bits(m, p.x.v[offset_of(base, r)]);
    }
    bool nan = m.hi > 0x7f800000 || m.top > 0xff800000u;
    float top = nan ? f_nan() : intBitsToFloat(m.hi >= 0 ? m.hi : m.lo);
    return OP == MIN ? -top : top;
}

// Elements [r0, r1) of output o's run, every `step`-th one from r0 + first.
float walk(uint base, uint r0, uint r1, uint first, uint step, float target) {
    if (OP == MAX || OP == MIN) return walk_max(base, r0, r1, first, step);
    float acc = identity();
    if (VEC != 0) {
        for (uint r = r0 + 4 * first; r < r1; r += 4 * step) {
            vec4 q = Quads(p.x).v[(base + r) >> 2];
            float t01 = combine(term(q.x, target), term(q.y, target));
            float t23 = combine(term(q.z, target), term(q.w, target));
            acc = combine(acc, combine(t01, t23));
        }
    } else {
        for (uint r = r0 + first; r < r1; r += step)
            acc = combine(acc, term(p.x.v[offset_of(base, r)], target));
    }
    return acc;
}

float finish(float acc) {
    if (OP == VAR) return acc / uintBitsToFloat(p.total);
    return OP == MEAN ? acc / float(p.total) : acc;
}

// VAR: the sums of d = x - c and of d^2 over the elements walk() would take.
vec2 walk_deviations(uint base, uint r0, uint r1, uint first, uint step, float c) {
    vec2 acc = vec2(0.0);
    if (VEC != 0) {
        for (uint r = r0 + 4 * first; r < r1; r += 4 * step) {
            vec4 d = Quads(p.x).v[(base + r) >> 2] - c;
            acc += vec2((d.x + d.y) + (d.z + d.w),
                        (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w));
        }
    } else {
        for (uint r = r0 + first; r < r1; r += step) {
            float d = p.x.v[offset_of(base, r)] - c;
            acc += vec2(d, d * d);
        }
    }
    return acc;
}

// VAR: a run's statistics (count, mean c + lo, M2), from its count n, its center c and
// the sums of its deviations from c. sum(d^2) - sum(d) lo removes what c's distance from
// the mean added (n lo^2); nothing may go below 0 by rounding (a NaN stays).
vec4 run_stats(float n, float c, vec2 d) {
    if (n == 0.0) return vec4(0.0);
    float lo = d.x / n, m2 = d.y - d.x * lo;
    return vec4(n, c, lo, m2 < 0.0 ? 0.0 : m2);
}

// VAR: the statistics of the elements walk() would take, about the first of them, c. As c
// is one of them, (c - mean)^2 <= M2 and the squares summed are at most (n + 1) M2.
vec4 walk_stats(uint base, uint r0, uint r1, uint first, uint step) {
    uint r = r0 + (VEC != 0 ? 4 * first : first), stride = VEC != 0 ? 4 * step : step;
    if (r >= r1) return vec4(0.0);
    float c = p.x.v[offset_of(base, r)];
    vec2 d = walk_deviations(base, r0, r1, first, step, c);
    return run_stats(float((r1 - r + stride - 1) / stride * (stride / step)), c, d);
}

// VAR: Chan's merge of two runs' statistics: M2 is a's, b's and delta^2 n_a n_b / n, all
// non-negative, so nothing cancels; the mean stays a's c plus a moved lo.
vec4 merge(vec4 a, vec4 b) {
    if (b.x == 0.0) return a;
    if (a.x == 0.0) return b;
    float n = a.x + b.x, f = b.x / n;
    float delta = (b.y - a.y) + (b.z - a.z);
    return vec4(n, a.y, a.z + delta * f, a.w + b.w + (delta * delta) * (a.x * f));
}

// VAR: the statistics of item (o, s)'s run, from its partial results (out_: three floats
// an item; the count follows from s).
vec4 item_stats(uint o, uint s) {
    uint at = 3 * (s * p.n_out + o);
    float n = float(min(p.count, (s + 1) * p.chunk) - s * p.chunk);
    return vec4(n, p.out_.v[at], p.out_.v[at + 1], p.out_.v[at + 2]);
}

void store_stats(uint it, vec4 st) {
    p.out_.v[3 * it] = st.y;
    p.out_.v[3 * it + 1] = st.z;
    p.out_.v[3 * it + 2] = st.w;
}

// FINISH: count an item of output o in; true for the last of o's SPLITS items. The item's
// partial result, stored before, is visible to whoever then reads it.
bool count_in(uint o) {
    memoryBarrierBuffer();
    return atomicAdd(p.counters.v[o], 1u) == p.splits - 1;
}

// FINISH: the SPLITS partial results of o, every `step`-th from s = first, combined.
float gather(uint o, uint first, uint step) {
    memoryBarrierBuffer();
    float acc = identity();
    for (uint s = first; s < p.splits; s += step)
        acc = combine(acc, p.out_.v[s * p.n_out + o]);
    return acc;
}

// FINISH, VAR: the items' statistics likewise, merged in order of s.
vec4 gather_stats(uint o, uint first, uint step) {
    memoryBarrierBuffer();
    vec4 acc = vec4(0.0);
    for (uint s = first; s < p.splits; s += step) acc = merge(acc, item_stats(o, s));
    return acc;
}

// The WG values of the workgroup's threads combined by a tree; every thread gets it.
float combine_group(float v) {
    uint lid = gl_LocalInvocationID.x;
    part[lid] = v;
    barrier();
    [[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) part[lid] = combine(part[lid], part[lid + s]);
        barrier();
    }
    float all = part[0];
    barrier();                        // part is free again
    return all;
}

// VAR: the workgroup's statistics merged by a tree, in a fixed order; every thread gets
// the result.
vec4 combine_group_var(vec4 v) {
    uint lid = gl_LocalInvocationID.x;
    stats[lid] = v;
    barrier();
    [[unroll]] for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) stats[lid] = merge(stats[lid], stats[lid + s]);
        barrier();
    }
    vec4 all = stats[0];
    barrier();
    return all;
}

// VAR: item `it`'s statistics (output o, run [r0, r1)), walked by the workgroup
// (GROUP_ITEMS) or by one thread.
vec4 var_item(uint o, uint r0, uint r1) {
    uint base = base_of(o);
    if (GROUP_ITEMS == 0) {
        float n = float(r1 - r0);
        float c = walk(base, r0, r1, 0, 1, 0.0) / n;
        return run_stats(n, c, walk_deviations(base, r0, r1, 0, 1, c));
    }
    return combine_group_var(walk_stats(base, r0, r1, gl_LocalInvocationID.x, WG));
}

void main_var() {
    uint items = p.n_out * p.splits;
    uint lid = gl_LocalInvocationID.x;
    uint first = GROUP_ITEMS == 0 ? gl_GlobalInvocationID.x : gl_WorkGroupID.x;
    uint step = GROUP_ITEMS == 0 ? gl_NumWorkGroups.x * WG : gl_NumWorkGroups.x;
    for (uint it = first; it < items; it += step) {
        uint o = it % p.n_out, r0 = (it / p.n_out) * p.chunk;
        vec4 st = var_item(o, r0, min(p.count, r0 + p.chunk));
        if (FINISH == 0) {                 // (one item an output: the planner's rule)
            if (GROUP_ITEMS == 0 || lid == 0) p.out_.v[it] = finish(st.w);
            continue;
        }
        if (GROUP_ITEMS == 0) {
            store_stats(it, st);
            if (count_in(o)) {
                p.final_.v[o] = finish(gather_stats(o, 0, 1).w);
                p.counters.v[o] = 0;
            }
            continue;
        }
        if (lid == 0) {
            store_stats(it, st);
            last_item = count_in(o);
        }
        barrier();
        if (last_item) {
            vec4 all = combine_group_var(gather_stats(o, lid, WG));
            if (lid == 0) {
                p.final_.v[o] = finish(all.w);
                p.counters.v[o] = 0;
            }
        }
        barrier();
    }
}

void main() {
    if (OP == VAR) {
        main_var();
        return;
    }
    uint items = p.n_out * p.splits;
    if (GROUP_ITEMS == 0) {
        uint lanes = gl_NumWorkGroups.x * WG;
        for (uint it = gl_GlobalInvocationID.x; it < items; it += lanes) {
            uint o = it % p.n_out, r0 = (it / p.n_out) * p.chunk;
            float target = OP == COUNT_EQ || CENTERED != 0 ? p.y.v[o] : 0.0;
            float acc = walk(base_of(o), r0, min(p.count, r0 + p.chunk), 0, 1, target);
            if (FINISH == 0) {
                p.out_.v[it] = finish(acc);
            } else {
                p.out_.v[it] = acc;
                if (count_in(o)) {
                    p.final_.v[o] = finish(gather(o, 0, 1));
                    p.counters.v[o] = 0;
                }
            }
        }
        return;
    }
    uint lid = gl_LocalInvocationID.x;
    for (uint it = gl_WorkGroupID.x; it < items; it += gl_NumWorkGroups.x) {
        uint o = it % p.n_out, r0 = (it / p.n_out) * p.chunk;
        float target = OP == COUNT_EQ || CENTERED != 0 ? p.y.v[o] : 0.0;
        float acc = combine_group(walk(base_of(o), r0, min(p.count, r0 + p.chunk), lid, WG,
                                       target));
        if (FINISH == 0) {
            if (lid == 0) p.out_.v[it] = finish(acc);
            continue;
        }
        if (lid == 0) {
            p.out_.v[it] = acc;
            last_item = count_in(o);
        }
        barrier();
        if (last_item) {              // the workgroup combines o's partial results
            float all = combine_group(gather(o, lid, WG));
            if (lid == 0) {
                p.final_.v[o] = finish(all);
                p.counters.v[o] = 0;
            }
        }
        barrier();                    // last_item is read before the next item sets it
    }
}
