#version 460
// Fused optimizer updates, in place on weights and state; the twins of
// dualgrad/cpu/optim.py. RULE (dualgrad/kernel_ops.py's OPTIM) picks the update; its state
// is s0, s1, s2 as OPTIM_STATE orders it, its scalars h are read by the names of
// OPTIM_HYPER and its options from the FLAG_ bits (opcodes.glsl).
// HYPER_BUFFER 1: the scalars and flags come from OPTIM_SCALARS + 1 words at address hp
// instead (a captured step rewrites them before each replay).
// TABLE 1: one dispatch updates several tensors with the same scalars (an optimizer's
// parameters): w is then the address of a table of p.n entries, in order of their first
// workgroup, and each workgroup updates `chunk` elements of the entry it falls in.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "opcodes.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint RULE = 0;
layout(constant_id = 1) const uint HYPER_BUFFER = 0;
layout(constant_id = 2) const uint TABLE = 0;

layout(push_constant) uniform Push {
    Floats w; Floats g; Floats s0; Floats s1; Floats s2;
    uint n; uint flags; float h[OPTIM_SCALARS]; Floats hp;
} p;

// A tensor of a TABLE dispatch (56 bytes, as the backend packs it).
struct Entry { Floats w; Floats g; Floats s0; Floats s1; Floats s2; uint n; uint first;
               uint chunk; uint unused; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer Table { Entry e[]; };

float h[OPTIM_SCALARS];
uint flags;

bool has(uint flag) { return (flags & flag) != 0u; }

// torch.maximum's rule: NaN when either is NaN.
float nan_max(float a, float b) { return (a > b || isnan(a)) ? a : b; }

void update(Floats pw, Floats pg, Floats s0, Floats s1, Floats s2, uint i) {
    float grad = has(FLAG_MAXIMIZE) ? -pg.v[i] : pg.v[i];
    if (RULE == RULE_SGD) {
        float w = pw.v[i];
        if (h[SGD_WD] != 0.0) grad = grad + h[SGD_WD] * w;
        if (has(FLAG_MOMENTUM_BUFFER)) {
            float buf = has(FLAG_FIRST)
                ? grad : s0.v[i] * h[SGD_MOMENTUM] + (1.0 - h[SGD_DAMPENING]) * grad;
            s0.v[i] = buf;
            grad = has(FLAG_NESTEROV) ? grad + h[SGD_MOMENTUM] * buf : buf;
        }
        pw.v[i] = w - h[SGD_LR] * grad;
    } else if (RULE == RULE_RMSPROP) {
        float w = pw.v[i];
        grad = grad + h[RMSPROP_L2] * w;
        float sq = s0.v[i] * h[RMSPROP_ALPHA] + h[RMSPROP_ONE_MINUS_ALPHA] * grad * grad;
        s0.v[i] = sq;
        if (has(FLAG_CENTERED)) {
            float mean = s2.v[i] + h[RMSPROP_ONE_MINUS_ALPHA] * (grad - s2.v[i]);
            s2.v[i] = mean;
            sq = sq - mean * mean;
        }
        float avg = sqrt(sq) + h[RMSPROP_EPS];
        if (has(FLAG_MOMENTUM_BUFFER)) {
            float buf = s1.v[i] * h[RMSPROP_MOMENTUM] + grad / avg;
            s1.v[i] = buf;
            pw.v[i] = w - h[RMSPROP_LR] * buf;
        } else {
            pw.v[i] = w - h[RMSPROP_LR] * grad / avg;
        }
    } else if (RULE == RULE_ADAGRAD) {
        float w = pw.v[i];
        grad = grad + h[ADAGRAD_L2] * w;
        float sum = s0.v[i] + grad * grad;
        s0.v[i] = sum;
        pw.v[i] = w - h[ADAGRAD_CLR] * grad / (sqrt(sum) + h[ADAGRAD_EPS]);
    } else if (RULE == RULE_ADAMAX) {
        float w = pw.v[i];
        grad = grad + h[ADAMAX_L2] * w;
        float m = s0.v[i] + h[ADAMAX_ONE_MINUS_BETA1] * (grad - s0.v[i]);
        float u = nan_max(s1.v[i] * h[ADAMAX_BETA2], abs(grad) + h[ADAMAX_EPS]);
        s0.v[i] = m;
        s1.v[i] = u;
        pw.v[i] = w - h[ADAMAX_STEP_SIZE] * m / u;
    } else {
        // Adam, NAdam and RAdam share their moments (the scalars' positions too).
        float w = pw.v[i] * h[ADAM_DECAY];                  // decoupled weight decay
        grad = grad + h[ADAM_L2] * w;                        // or an L2 term
        float m = s0.v[i] + h[ADAM_ONE_MINUS_BETA1] * (grad - s0.v[i]);
        float v = s1.v[i] * h[ADAM_BETA2] + h[ADAM_ONE_MINUS_BETA2] * grad * grad;
        s0.v[i] = m;
        s1.v[i] = v;
        if (RULE == RULE_ADAM) {
            if (has(FLAG_AMSGRAD)) {
                v = nan_max(s2.v[i], v);
                s2.v[i] = v;
            }
            pw.v[i] = w - h[ADAM_STEP_SIZE] * m / (sqrt(v) / h[ADAM_BC2_SQRT] + h[ADAM_EPS]);
        } else if (RULE == RULE_NADAM) {
            float den = sqrt(v) / h[NADAM_BC2_SQRT] + h[NADAM_EPS];
            pw.v[i] = w - (h[NADAM_GRAD_COEF] * grad + h[NADAM_M_COEF] * m) / den;
        } else {                                             // RULE_RADAM
            pw.v[i] = has(FLAG_RECTIFIED)
                ? w - h[RADAM_STEP_SIZE] * m / (sqrt(v) + h[RADAM_EPS])
                : w - h[RADAM_STEP_SIZE] * m;
        }
    }
}

void main() {
    for (int k = 0; k < int(OPTIM_SCALARS); ++k) h[k] = HYPER_BUFFER != 0u ? p.hp.v[k] : p.h[k];
    flags = HYPER_BUFFER != 0u ? floatBitsToUint(p.hp.v[OPTIM_SCALARS]) : p.flags;
    if (TABLE == 0) {
        uint stride = gl_NumWorkGroups.x * WG;
        for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
            update(p.w, p.g, p.s0, p.s1, p.s2, i);
        return;
    }
    Table table = Table(p.w);
    uint group = gl_WorkGroupID.x, e = 0;
    while (e + 1 < p.n && table.e[e + 1].first <= group) ++e;
    Entry t = table.e[e];
    uint begin = (group - t.first) * t.chunk, end = min(t.n, begin + t.chunk);
    for (uint i = begin + gl_LocalInvocationID.x; i < end; i += WG)
        update(t.w, t.g, t.s0, t.s1, t.s2, i);
}
