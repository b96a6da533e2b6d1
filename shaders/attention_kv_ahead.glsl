// The next tile of keys and values for the tiled kernels that stream them
// (attention_tiled.comp, attention_tiled_dq.comp, whose shared tiles ks and vs these fill):
// loaded into registers while this tile is multiplied out (its loads in flight behind the
// products), then stored once every read of this tile is done: about a tenth faster at T =
// 1024-4096 (bench/RESULTS.md).
const uint CARRIED = (COLS * QROW + THREADS - 1) / THREADS;   // quads a thread carries
vec4 k_next[CARRIED], v_next[CARRIED];

void fetch(Rows kr, uint j0) {
    for (uint i = 0; i < CARRIED; ++i) {
        uint e = gl_LocalInvocationIndex + i * THREADS, r = e / QROW, c = e % QROW;
        bool in_ = e < COLS * QROW && j0 + r < p.S;
        uint at = in_ ? row_at(kr, j0 + r) / 4 + c : 0u;
        k_next[i] = in_ ? load_quad(p.k, at) : vec4(0.0);
        v_next[i] = in_ ? load_quad(p.v, at) : vec4(0.0);
    }
}

void stash() {
    for (uint i = 0; i < CARRIED; ++i) {
        uint e = gl_LocalInvocationIndex + i * THREADS, r = e / QROW, c = e % QROW;
        if (e < COLS * QROW) {
            ks[r * SROW + c] = k_next[i];
            vs[r * SROW + c] = v_next[i];
        }
    }
}
