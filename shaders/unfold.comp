#version 460
// Sliding windows of images (im2col, col2im, max pooling); the twin of
// dualgrad/cpu/unfold.py, whose docstring has the geometry. MODE 0 (unfold): a thread per
// column element copies its pixel (or the padding value) as bits, any 4-byte dtype.
// MODE 1 (fold): a thread per pixel adds the column elements that read it, in (i, j)
// order: no atomics, and the cpu's sums bit for bit. MODE 2 (max pool): a thread per
// window, the flat index of its first in-bounds element replaced by each larger one or
// NaN (PyTorch's rule), floats compared as integer keys (so a device that flushes
// subnormals still orders them); -1 for a window with nothing in bounds.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;

layout(push_constant) uniform Push {
    Ints src; Ints out_;
    uint n; uint C; uint H; uint W; uint kh; uint kw; uint dh; uint dw; uint sh; uint sw;
    uint oh; uint ow; int ph; int pw; int value;
} p;

void main() {
    uint stride = gl_NumWorkGroups.x * WG;
    uint L = p.oh * p.ow;
    uint K = p.kh * p.kw;
    for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
        if (MODE == 0u) {
            uint l = e % L, r = e / L;
            uint k = r % (p.C * K), b = r / (p.C * K);
            uint c = k / K, i = (k / p.kw) % p.kh, j = k % p.kw;
            int y = int((l / p.ow) * p.sh + i * p.dh) - p.ph;
            int x = int((l % p.ow) * p.sw + j * p.dw) - p.pw;
            bool inside = y >= 0 && y < int(p.H) && x >= 0 && x < int(p.W);
            p.out_.v[e] = inside ? p.src.v[((b * p.C + c) * p.H + uint(y)) * p.W + uint(x)]
                                 : p.value;
        } else if (MODE == 2u) {
            uint l = e % L, bc = e / L;
            int best = 0, at = -1;
            for (uint i = 0; i < p.kh; ++i) {
                int y = int((l / p.ow) * p.sh + i * p.dh) - p.ph;
                if (y < 0 || y >= int(p.H)) continue;
                for (uint j = 0; j < p.kw; ++j) {
                    int x = int((l % p.ow) * p.sw + j * p.dw) - p.pw;
                    if (x < 0 || x >= int(p.W)) continue;
                    int bits = p.src.v[(bc * p.H + uint(y)) * p.W + uint(x)];
                    bool nan_ = (bits & 0x7fffffff) > 0x7f800000;
                    int key = bits < 0 ? -(bits & 0x7fffffff) : bits;
                    if (at < 0 || nan_ || key > best) {
                        best = nan_ ? 0x7fffffff : key;
                        at = y * int(p.W) + x;
                    }
                }
            }
            p.out_.v[e] = at;
        } else {
            uint x = e % p.W, y = (e / p.W) % p.H, bc = e / (p.W * p.H);
            float acc = 0.0;
            for (uint i = 0; i < p.kh; ++i) {
                int ty = int(y) + p.ph - int(i * p.dh);
                if (ty < 0 || uint(ty) % p.sh != 0u || uint(ty) / p.sh >= p.oh) continue;
                uint row = (bc * p.kh + i) * p.kw;
                for (uint j = 0; j < p.kw; ++j) {
                    int tx = int(x) + p.pw - int(j * p.dw);
                    if (tx < 0 || uint(tx) % p.sw != 0u || uint(tx) / p.sw >= p.ow) continue;
                    acc += intBitsToFloat(p.src.v[(row + j) * L + (uint(ty) / p.sh) * p.ow
                                                  + uint(tx) / p.sw]);
                }
            }
            p.out_.v[e] = floatBitsToInt(acc);
        }
    }
}
