#version 460
// The fma matmul kernel of matmul.glsl with WHOLE 2: the tiles inside the matrix whole,
// the edge tiles tested, each workgroup taking its own code.
#extension GL_GOOGLE_include_directive : require
#define EDGE_TILES
#include "matmul.glsl"
