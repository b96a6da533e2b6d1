#version 460
// Cumulative sums of floats along an axis, the tensor read as (lines, n) or (outer, n, inner);
// the twin of dualgrad/cpu/scan.py (the body is scan.glsl, intscan.comp's too). Logical element j of a line is at position j, or n - 1 - j with
// REVERSE (the sum from the end: cumsum's gradient).
// MODE 0 (COLUMNS): a thread a line, adding along it in order (lines of stride `inner`).
// Lines of stride 1 are cut into tiles of TILE elements, a workgroup a tile. Reduce, then
// scan (each element read twice, written once, and the same sums in every run, where a
// look-back between tiles would add the tiles' totals in an order that depends on timing):
// MODE 1 (TOTALS): each tile's total to totals[line * tiles + tile], GROUP tiles a
//   workgroup; the workgroup that counts in last for its line turns the line's totals into
//   the sums of the tiles before each (as reduce.comp's FINISH), in place.
// MODE 2 (SCAN): the tile is read into shared memory in lines of 256 (coalesced), a thread
//   scans a run of RUN contiguous elements, the workgroup scans the runs' totals, and the
//   tile is written in lines again, each element plus the sum of the tiles before.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

#define SCALAR float
#define VALUES Floats
#include "scan.glsl"
