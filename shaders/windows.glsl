// A convolution's windows, read where they lie in the images: the specialization constants
// (18-31 in every shader that includes this) and the reads. Needs common.glsl's Floats.
// WINDOWS: a convolution as a product whose windows are read where they lie in the images
// (no unfolded copy of them in memory), in matmul.glsl's fma kernel and (1 only)
// matmul_bf16x6.comp. 1 (conv2d): B is the windows of images, element
// k = (c, i, j) of window n = (oy, ox) of image z (B's batch) at B[k][n], 0 in the padding.
// 2 (conv2d_weight): K runs over (image, window) pairs k = image * OL + l; A[m][k] is
// element m = (c, i, j) of that window, B[k][n] = g[image][n][l] (g laid out (images, N,
// OL)). The geometry is constants, so finding a window's element divides by constants.
layout(constant_id = 18) const uint WINDOWS = 0;
layout(constant_id = 19) const uint IC = 1;     // an image's channels, rows, columns
layout(constant_id = 20) const uint IH = 1;
layout(constant_id = 21) const uint IW = 1;
layout(constant_id = 22) const uint KH = 1;     // kernel rows, columns
layout(constant_id = 23) const uint KW = 1;
layout(constant_id = 24) const uint DH = 1;     // dilation
layout(constant_id = 25) const uint DW = 1;
layout(constant_id = 26) const uint SH = 1;     // stride
layout(constant_id = 27) const uint SW = 1;
layout(constant_id = 28) const uint OW = 1;     // windows in a row of them
layout(constant_id = 29) const uint OL = 1;     // windows in an image
layout(constant_id = 30) const int PH = 0;      // top and left padding (may be negative)
layout(constant_id = 31) const int PW = 0;

// How many of the 4 elements from i lie before end.
uint valid4(uint i, uint end) { return i < end ? min(4u, end - i) : 0u; }

// Element `col` = (c, i, j) of window `l` = (oy, ox) of the image at `base` of `f`; 0 in
// the padding.
float window_at(Floats f, uint base, uint col, uint l) {
    uint c = col / (KH * KW), r = col % (KH * KW);
    int y = int((l / OW) * SH + (r / KW) * DH) - PH;
    int x = int((l % OW) * SW + (r % KW) * DW) - PW;
    return y >= 0 && y < int(IH) && x >= 0 && x < int(IW)
        ? f.v[base + (c * IH + uint(y)) * IW + uint(x)] : 0.0;
}

// Element `col` = (c, i, j) of the `valid` windows from `l` = (oy, ox) (of the image at
// `base`: WINDOWS 1), or from window l of the images' windows one after another (WINDOWS
// 2); 0 in the padding. The first window's place is found by division, the next ones'
// by counting on from it.
vec4 window_quad(Floats f, uint base, uint col, uint l, uint valid) {
    uint c = col / (KH * KW), r = col % (KH * KW);
    int iy = int((r / KW) * DH) - PH, ix = int((r % KW) * DW) - PW;
    uint image = WINDOWS == 1 ? 0u : l / OL, w = WINDOWS == 1 ? l : l % OL;
    uint oy = w / OW, ox = w % OW;
    vec4 q = vec4(0.0);
    [[unroll]] for (uint e = 0; e < 4; ++e) {
        int y = int(oy * SH) + iy, x = int(ox * SW) + ix;
        uint at = (WINDOWS == 1 ? base : image * (IC * IH * IW)) + c * (IH * IW);
        if (e < valid && y >= 0 && y < int(IH) && x >= 0 && x < int(IW))
            q[e] = f.v[at + uint(y) * IW + uint(x)];
        ox += 1u;
        if (ox == OW) {
            ox = 0u;
            oy += 1u;
            if (oy == OL / OW) { oy = 0u; image += 1u; }
        }
    }
    return q;
}

