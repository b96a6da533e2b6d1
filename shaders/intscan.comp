#version 460
// Cumulative sums of int32 along an axis, wrapping as int32 arithmetic does: scan.comp's
// modes in int (scan.glsl); the twin of dualgrad/cpu/scan.py for int32 (bools are converted
// to int32 first). The sums are exact, so the lines' tiles add alike in any order.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

#define SCALAR int
#define VALUES Ints
#include "scan.glsl"
