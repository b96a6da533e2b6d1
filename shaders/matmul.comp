#version 460
// The fma matmul kernel, as matmul.glsl describes it: every tile tested (WHOLE 0) or every
// tile whole (WHOLE 1).
#extension GL_GOOGLE_include_directive : require
#include "matmul.glsl"
