#version 460
// The float32-accurate product from three bfloat16 pieces, and autocast's of one:
// matmul_tc.glsl.
#extension GL_GOOGLE_include_directive : require
#include "matmul_tc.glsl"
