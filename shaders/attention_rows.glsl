// Where the rows of fused attention's operands lie (attention.comp and the tiled shaders),
// in floats: row r of head-row b of q (and dq) starts at (b / H) * q_outer + (b % H) * HEAD
// + r * q_row; of k, v, dk and dv by k_outer and k_row; of o and g by o_outer and o_row.
// Contiguous (B, rows, HEAD) arrays are H = 1; self-attention's projection (N, L, 3, H,
// HEAD) is read in place (q, k, v a third of each row apart), its output (N, L, H, HEAD)
// written so. lse and delta are (B, L) always.
const uint Q_ROWS = 0, K_ROWS = 1, O_ROWS = 2;

uint row_at(uint which, uint b, uint r) {
    uint outer = which == Q_ROWS ? p.q_outer : (which == K_ROWS ? p.k_outer : p.o_outer);
    uint step = which == Q_ROWS ? p.q_row : (which == K_ROWS ? p.k_row : p.o_row);
    return (b / p.H) * outer + (b % p.H) * HEAD + r * step;
}
