// Where the rows of fused attention's operands lie (attention.comp and the tiled shaders),
// in floats: row r of head-row b of q (and dq) starts at (b / H) * q_outer + (b % H) * HEAD
// + r * q_row; of k, v, dk and dv by k_outer and k_row; of o and g by o_outer and o_row.
// Contiguous (B, rows, HEAD) arrays are H = 1; self-attention's projection (N, L, 3, H,
// HEAD) is read in place (q, k, v a third of each row apart), its output (N, L, H, HEAD)
// written so. lse and delta are (B, L) always. A workgroup takes one head-row: it finds
// the first row of each operand once (a division by H is dear) and steps from there.
const uint Q_ROWS = 0, K_ROWS = 1, O_ROWS = 2;

struct Rows { uint first; uint step; };

Rows rows_of(uint which, uint b) {
    uint outer = which == Q_ROWS ? p.q_outer : (which == K_ROWS ? p.k_outer : p.o_outer);
    uint step = which == Q_ROWS ? p.q_row : (which == K_ROWS ? p.k_row : p.o_row);
    return Rows((b / p.H) * outer + (b % p.H) * HEAD, step);
}

uint row_at(Rows rows, uint r) { return rows.first + r * rows.step; }
