// Shared by the tiled attention shaders (attention_tiled.comp, attention_tiled_dq.comp,
// attention_tiled_grad.comp): fused attention in tiles, for rows (heads) of 64 (the
// others take attention.comp: see attention.py). A shader sets TX, its column groups, before
// including this. A thread holds a 4 x PER block of a score tile, rows 4 ty + r by columns
// tx + TX c (PER = COLS / TX), and a 4-row block of an output, columns 4 tx + 4 TX e (a
// quad each), so that each quad read from shared memory feeds several multiply-adds (the
// thread-a-row kernel of attention.comp reads one value a multiply-add). Shared rows are
// HEAD + 4 floats apart: the column groups' quads then fall in distinct banks.

layout(push_constant) uniform Push {
    Floats q; Floats k; Floats v; Floats o; Floats lse; Floats g; Floats delta;
    Floats dq; Floats dk; Floats dv;
    uint L; uint S; float scale;
    uint H; uint q_outer; uint q_row; uint k_outer; uint k_row; uint o_outer; uint o_row;
} p;
#include "attention_rows.glsl"
#include "attention16.glsl"

const uint COLS = 32;                  // a score tile's columns
const uint PER = COLS / TX;            // ... a thread holds of each of its rows
const uint QROW = HEAD / 4;            // quads a row, in global memory
const uint SROW = (HEAD + 4) / 4;      // quads a row, in shared memory
const uint QUADS = QROW / TX;          // output quads a row a thread holds
const uint TROW = (ROWS + 4) / 4;      // quads a row of a transposed score tile (keys x rows)

// Rows [first, first + n) of src (where `rows` says: attention_rows.glsl; zeros from row
// `count` on) into the shared quads `dst`, padded.
#define LOAD_ROWS(dst, src, rows, first, n, count)                                          \
    for (uint e_ = gl_LocalInvocationIndex; e_ < (n) * QROW; e_ += gl_WorkGroupSize.x) {   \
        uint r_ = e_ / QROW, c_ = e_ % QROW;                                                \
        dst[r_ * SROW + c_] = (first) + r_ < (count)                                        \
            ? load_quad(src, row_at(rows, (first) + r_) / 4 + c_) : vec4(0.0);               \
    }

// s += a . b as a chain of fused multiply-adds (dot() adds its products apart, then to s).
#define DOT4(s, a, b) s = fma(a.w, b.w, fma(a.z, b.z, fma(a.y, b.y, fma(a.x, b.x, s))))

// s[r][c] = a row (4 ty + r) . b row (tx + TX c), over the head.
#define SCORES(s, a, b, ty, tx)                                                             \
    for (uint r_ = 0; r_ < 4; ++r_)                                                         \
        for (uint c_ = 0; c_ < PER; ++c_) s[r_][c_] = 0.0;                                  \
    for (uint d_ = 0; d_ < QROW; ++d_) {                                                    \
        vec4 a_[4], b_[PER];                                                                \
        for (uint r_ = 0; r_ < 4; ++r_) a_[r_] = a[(4 * (ty) + r_) * SROW + d_];            \
        for (uint c_ = 0; c_ < PER; ++c_) b_[c_] = b[((tx) + TX * c_) * SROW + d_];         \
        for (uint r_ = 0; r_ < 4; ++r_)                                                     \
            for (uint c_ = 0; c_ < PER; ++c_) DOT4(s[r_][c_], a_[r_], b_[c_]);              \
    }

// acc[r][e] += sum over the tile's columns j of t[j][rows 4 ty + r] * b[j][quad tx + TX e]:
// t is a transposed score tile (keys x rows), b shared rows.
#define ACCUMULATE(acc, t, b, ty, tx)                                                       \
    for (uint j_ = 0; j_ < COLS; ++j_) {                                                    \
        vec4 w_ = t[j_ * TROW + (ty)];                                                      \
        for (uint e_ = 0; e_ < QUADS; ++e_) {                                               \
            vec4 x_ = b[j_ * SROW + (tx) + TX * e_];                                        \
            for (uint r_ = 0; r_ < 4; ++r_) acc[r_][e_] += w_[r_] * x_;                     \
        }                                                                                   \
    }
