#version 460
// attention_tiled_grad.comp that also makes dq, adding each tile's share of it atomically
// (attention_keys.glsl): on devices with VK_EXT_shader_atomic_float, for float32 rows.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_atomic_float : require
#define ATOMIC_DQ
#include "attention_keys.glsl"
