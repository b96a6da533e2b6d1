#version 460
// Fused optimizer updates, in place on weights and state; the twins of
// dualgrad/cpu/optim.py. KIND 0: Adam/AdamW (h = beta1, beta2, 1 - beta1, 1 - beta2, eps,
// l2, decay, step_size, bc2_sqrt); KIND 1: SGD (h = lr, momentum, dampening, wd; flags:
// 1 momentum buffer, 2 nesterov, 4 first step). HYPER_BUFFER 1: the scalars and flags come
// from ten words at address hp instead (a captured step rewrites them before each replay).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint KIND = 0;
layout(constant_id = 1) const uint HYPER_BUFFER = 0;

layout(push_constant) uniform Push {
    Floats w; Floats g; Floats s0; Floats s1;
    uint n; uint flags; float h[9]; Floats hp;
} p;

float h[9];
uint flags;

void main() {
    for (int k = 0; k < 9; ++k) h[k] = HYPER_BUFFER != 0u ? p.hp.v[k] : p.h[k];
    flags = HYPER_BUFFER != 0u ? floatBitsToUint(p.hp.v[9]) : p.flags;
    uint stride = gl_NumWorkGroups.x * WG;
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
        if (KIND == 0) {
            float w = p.w.v[i] * h[6];                  // AdamW decays the weight
            float grad = p.g.v[i] + h[5] * w;           // Adam adds an L2 term
            float m = p.s0.v[i] + h[2] * (grad - p.s0.v[i]);
            float v = p.s1.v[i] * h[1] + h[3] * grad * grad;
            p.s0.v[i] = m;
            p.s1.v[i] = v;
            p.w.v[i] = w - h[7] * m / (sqrt(v) / h[8] + h[4]);
        } else {
            float w = p.w.v[i];
            float d = p.g.v[i];
            if (h[3] != 0.0) d = d + h[3] * w;
            if ((flags & 1u) != 0u) {
                float buf = (flags & 4u) != 0u ? d
                    : p.s0.v[i] * h[1] + (1.0 - h[2]) * d;
                p.s0.v[i] = buf;
                d = (flags & 2u) != 0u ? d + h[1] * buf : buf;
            }
            p.w.v[i] = w - h[0] * d;
        }
    }
}
