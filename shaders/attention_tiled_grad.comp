#version 460
// Fused attention's backward for the keys in tiles (rows of 64): attention.comp's MODE 2,
// dv_j = sum_i p_ij g_i and dk_j = sum_i ds_ij q_i, with a workgroup of 128 threads taking
// 32 keys (64 threads and 16 keys where shared memory is short) and the queries streaming
// past 32 at a time (attention_tiles.glsl says how a thread's work is laid out: here 16
// column groups, a thread 4 keys by 2 queries, which keeps its registers few enough for
// twice the threads of 8 groups: 1.5 times faster on an H100, bench/RESULTS.md). Each
// weight is recomputed from its row's log-sum-exp, p = exp(s - lse), and ds = p (dp -
// delta) scale, with delta = g_i . o_i from attention_tiled_dq.comp, which runs first.
#extension GL_GOOGLE_include_directive : require
#include "attention_keys.glsl"
