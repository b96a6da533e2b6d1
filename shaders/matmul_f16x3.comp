#version 460
// The float32-accurate product from two scaled float16 pieces: matmul_tc.glsl.
#extension GL_GOOGLE_include_directive : require
#define F16_PIECES 1
#include "matmul_tc.glsl"
