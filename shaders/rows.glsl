// Workgroup-wide reductions for the kernels that give one workgroup to each row.
shared float red[WG];

float wg_sum(float v) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] += red[lid + s];
        barrier();
    }
    float r = red[0];
    barrier();                   // everyone has read red[0] before it is reused
    return r;
}

float wg_max(float v) {
    uint lid = gl_LocalInvocationID.x;
    red[lid] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) red[lid] = max(red[lid], red[lid + s]);
        barrier();
    }
    float r = red[0];
    barrier();
    return r;
}
