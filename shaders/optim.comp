#version 460
// Fused optimizer updates, in place on weights and state; the twins of
// dualgrad/cpu/optim.py. KIND_ADAM: Adam/AdamW; KIND_SGD: SGD. The scalars h are read by
// the names of dualgrad/kernel_ops.py (ADAM_*, SGD_*: opcodes.glsl), as are SGD's flags.
// HYPER_BUFFER 1: the scalars and flags come from ten words at address hp instead (a
// captured step rewrites them before each replay).
// TABLE 1: one dispatch updates several tensors with the same scalars (an optimizer's
// parameters): w is then the address of a table of p.n entries, in order of their first
// workgroup, and each workgroup updates `chunk` elements of the entry it falls in.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = 0;
layout(constant_id = 1) const uint HYPER_BUFFER = 0;
layout(constant_id = 2) const uint TABLE = 0;

layout(push_constant) uniform Push {
    Floats w; Floats g; Floats s0; Floats s1;
    uint n; uint flags; float h[OPTIM_SCALARS]; Floats hp;
} p;

// A tensor of a TABLE dispatch (48 bytes, as the backend packs it).
struct Entry { Floats w; Floats g; Floats s0; Floats s1; uint n; uint first; uint chunk;
               uint unused; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Table { Entry e[]; };

float h[OPTIM_SCALARS];
uint flags;

void update(Floats pw, Floats pg, Floats s0, Floats s1, uint i) {
    if (KIND == KIND_ADAM) {
        float w = pw.v[i] * h[ADAM_DECAY];                  // AdamW decays the weight
        float grad = pg.v[i] + h[ADAM_L2] * w;              // Adam adds an L2 term
        float m = s0.v[i] + h[ADAM_ONE_MINUS_BETA1] * (grad - s0.v[i]);
        float v = s1.v[i] * h[ADAM_BETA2] + h[ADAM_ONE_MINUS_BETA2] * grad * grad;
        s0.v[i] = m;
        s1.v[i] = v;
        pw.v[i] = w - h[ADAM_STEP_SIZE] * m / (sqrt(v) / h[ADAM_BC2_SQRT] + h[ADAM_EPS]);
    } else {
        float w = pw.v[i];
        float d = pg.v[i];
        if (h[SGD_WD] != 0.0) d = d + h[SGD_WD] * w;
        if ((flags & SGD_FLAG_BUFFER) != 0u) {
            float buf = (flags & SGD_FLAG_FIRST) != 0u
                ? d : s0.v[i] * h[SGD_MOMENTUM] + (1.0 - h[SGD_DAMPENING]) * d;
            s0.v[i] = buf;
            d = (flags & SGD_FLAG_NESTEROV) != 0u ? d + h[SGD_MOMENTUM] * buf : buf;
        }
        pw.v[i] = w - h[SGD_LR] * d;
    }
}

void main() {
    for (int k = 0; k < int(OPTIM_SCALARS); ++k) h[k] = HYPER_BUFFER != 0u ? p.hp.v[k] : p.h[k];
    flags = HYPER_BUFFER != 0u ? floatBitsToUint(p.hp.v[OPTIM_SCALARS]) : p.flags;
    if (TABLE == 0) {
        uint stride = gl_NumWorkGroups.x * WG;
        for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
            update(p.w, p.g, p.s0, p.s1, i);
        return;
    }
    Table table = Table(p.w);
    uint group = gl_WorkGroupID.x, e = 0;
    while (e + 1 < p.n && table.e[e + 1].first <= group) ++e;
    Entry t = table.e[e];
    uint begin = (group - t.first) * t.chunk, end = min(t.n, begin + t.chunk);
    for (uint i = begin + gl_LocalInvocationID.x; i < end; i += WG)
        update(t.w, t.g, t.s0, t.s1, i);
}
