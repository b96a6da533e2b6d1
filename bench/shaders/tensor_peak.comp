#version 460
// The tensor cores' rate as a Vulkan shader reaches it (bench/tensor_peak.py): each warp
// multiplies 16 x 16 bfloat16 matrices into float32 accumulators, RM x RN of them, STEPS
// times over. FROM_SHARED 0: the operands stay in registers (the instruction's own rate);
// 1: each step reads its RM A and RN B blocks from shared memory first, as a product's
// warp of RM x RN blocks does (matmul_bf16x6.comp), but with no global loads or barriers.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_bfloat16 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 0) const uint RM = 4;          // a warp's blocks: rows
layout(constant_id = 1) const uint RN = 4;          // ... columns
layout(constant_id = 2) const uint STEPS = 4096;
layout(constant_id = 3) const uint FROM_SHARED = 0;
layout(local_size_x_id = 4) in;                     // warps x 32

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Words { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(push_constant) uniform Push { Words src; Floats dst; uint salt; } p;

#define FragA coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FragB coopmat<bfloat16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define Acc coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Two 64 x 16 bfloat16 panels (A's rows, B's columns) with rows padded by 16 bytes, as the
// product kernel's shared tiles are.
const uint ROW = 3;                                  // words a padded row of 16 values
shared uvec4 tiles[(2 * 64 + 8) * ROW];  // (+ 8 rows: the loads shifted by 8)

void main() {
    uint lid = gl_LocalInvocationID.x;
    for (uint e = lid; e < (2 * 64 + 8) * ROW; e += gl_WorkGroupSize.x)
        tiles[e] = p.src.v[e % 64] ^ uvec4(p.salt);
    barrier();
    FragA a[RM];
    FragB b[RN];
    [[unroll]] for (uint i = 0; i < RM; ++i)
        coopMatLoad(a[i], tiles, 16 * i * ROW, ROW, gl_CooperativeMatrixLayoutRowMajor);
    [[unroll]] for (uint j = 0; j < RN; ++j)
        coopMatLoad(b[j], tiles, (64 + 16 * j) * ROW, ROW, gl_CooperativeMatrixLayoutRowMajor);
    Acc acc[RM][RN];
    [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j) acc[i][j] = Acc(0.0);
    for (uint s = 0; s < STEPS; ++s) {
        if (FROM_SHARED != 0) {
            uint k = (s & 1u) * 8u * ROW;            // (two places: the loads are not hoisted)
            [[unroll]] for (uint j = 0; j < RN; ++j)
                coopMatLoad(b[j], tiles, (64 + 16 * j) * ROW + k, ROW,
                            gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint i = 0; i < RM; ++i) {
                coopMatLoad(a[i], tiles, 16 * i * ROW + k, ROW,
                            gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint j = 0; j < RN; ++j)
                    acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
            }
        } else {
            [[unroll]] for (uint i = 0; i < RM; ++i)
                [[unroll]] for (uint j = 0; j < RN; ++j)
                    acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
        }
    }
    Acc total = acc[0][0];
    [[unroll]] for (uint i = 0; i < RM; ++i)
        [[unroll]] for (uint j = 0; j < RN; ++j)
            if (i + j > 0) total = total + acc[i][j];
    uint warp = gl_WorkGroupID.x * (gl_WorkGroupSize.x / 32) + lid / 32;
    coopMatStore(total, p.dst.v, warp * 256, 16, gl_CooperativeMatrixLayoutRowMajor);
}
