"""optim.comp: fused optimizer updates (every rule of ``kernel_ops.OPTIM``) in place, one tensor a dispatch or, through a
table of their addresses, all of an optimizer's tensors that share their scalars in one;
the twins of ``dualgrad/cpu/optim.py``.

The table goes to the device in the command stream (vkCmdUpdateBuffer), as push constants
do, so a steady step still uploads only its batch; a table of the same operands at the same
addresses as one made before (a training loop's next step) is that one again. While a step
is recorded, each dispatch's scalars go to a slot of the recording's scalar buffer, which a
replay's hooks rewrite (``dev.sink``)."""
from __future__ import annotations

import struct

import numpy as np

from ...kernel_ops import OPTIM, OPTIM_HYPER, OPTIM_SCALARS, optim_flags
from ..dispatch import WG, grid, packer, push_constants

_PUSH = packer(5, 2, OPTIM_SCALARS)    # w, g, s0, s1, s2; n, flags; the scalars
MAX_TABLE = 256                   # tensors a table dispatch updates, at most
TABLE_GROUPS = 32768              # about this many workgroups a table dispatch, at most
TABLE_ENTRY = struct.Struct("<5Q4I")    # addresses, n, first workgroup, chunk, unused
MAX_TABLES_KEPT = 16              # tables kept for reuse (an optimizer's, or a few of them
                                  # taking turns); past that, the kept ones are dropped


def _scalars(rule: str, hyper: dict) -> tuple:
    """(the flags word, the scalars padded to OPTIM_SCALARS) of ``rule``'s update."""
    floats = [hyper[k] for k in OPTIM_HYPER[rule]]
    return optim_flags(hyper), floats + [0.0] * (OPTIM_SCALARS - len(floats))


def _operands(w, g, state) -> tuple:
    """(w, g, s0, s1, s2): the state padded with None."""
    state = tuple(state or ())
    return (w, g) + state + (None,) * (3 - len(state))


def optim_step(dev, rule, w, g, state, hyper) -> None:
    if w.size:
        flags, floats = _scalars(rule, hyper)
        ops = _operands(w, g, state)
        _dispatch(dev, OPTIM.code[rule], tuple(h.address if h is not None else 0 for h in ops),
                  w.size, flags, floats, [h for h in ops if h is not None],
                  [h for k, h in enumerate(ops) if h is not None and k != 1])


def optim_steps(dev, rule, params, hyper) -> None:
    """Every (w, g, state) of ``params`` in one dispatch (``_steps``)."""
    flags, floats = _scalars(rule, hyper)
    tensors = []
    for w, g, state in params:
        if w.size:
            ops = _operands(w, g, state)
            tensors.append((ops, tuple(h for k, h in enumerate(ops) if k != 1)))
    _steps(dev, OPTIM.code[rule], tensors, flags, floats,
           lambda w, g, s0, s1, s2: optim_step(dev, rule, w, g, (s0, s1, s2), hyper))


def _steps(dev, rule, tensors, flags, floats, alone) -> None:
    """Updates of optim.comp's RULE sharing ``floats`` and ``flags``: ``tensors`` holds
    (operands, the ones written), up to MAX_TABLE of them in a dispatch of its TABLE (one
    alone: ``alone(*operands)``, the plain kernel)."""
    for at in range(0, len(tensors), MAX_TABLE):
        part = tensors[at:at + MAX_TABLE]
        if len(part) == 1:
            alone(*part[0][0])
        elif dev.sink is not None:           # a replay's hook: its scalars only
            dev.sink.put(floats, flags)
        else:
            table, groups = _table(dev, [operands for operands, _ in part])
            _dispatch(dev, rule, (table.address, 0, 0, 0, 0), len(part), flags, floats,
                      [table] + [h for operands, _ in part for h in operands
                                 if h is not None],
                      [h for _, written in part for h in written if h is not None], groups)


def _table(dev, part) -> tuple:
    """(the table of a TABLE dispatch over the operands of ``part`` (None: none), its
    grid): each tensor's workgroups take ``chunk`` elements each, at least 4 a thread.
    Outside a recording, a table of the same operands at the same addresses as one made
    before is that one again, kept in the persistent pool: nothing is packed or written."""
    key = None
    if dev.capture is None:
        key = tuple([h.address if h is not None else 0 for q in part for h in q] +
                    [q[0].size for q in part])
        made = dev.tables.get(key)
        if made is not None:
            return made
    total = sum(q[0].size for q in part)
    chunk = 4 * WG * -(-total // (4 * WG * TABLE_GROUPS))
    rows, first = [], 0
    for q in part:
        addrs = [h.address if h is not None else 0 for h in q]
        rows.append(TABLE_ENTRY.pack(*addrs, q[0].size, first, chunk, 0))
        first += -(-q[0].size // chunk)
    data = b"".join(rows)
    with dev.lock:
        capture = dev.capture
        table = dev.empty((len(data) // 4,), np.uint32, persistent=capture is None)
        dev.fill_bytes(table, data)
        if capture is None and key is not None:   # (no recording began or ended meanwhile)
            if len(dev.tables) >= MAX_TABLES_KEPT:
                dev.tables.clear()
            dev.tables[key] = table, (first, 1, 1)
    return table, (first, 1, 1)


def _dispatch(dev, rule, addrs, n, flags, floats, reads, writes, table_grid=None) -> None:
    """One optim.comp dispatch of the five operands at ``addrs`` (0: none), or with
    ``table_grid`` a TABLE dispatch of that grid over the table at addrs[0], of n entries.
    While a step is recorded, the scalars and flags go to a slot of the recording's scalar
    buffer (rewritten before each replay); while a replay's hooks run, they only fill the
    next slot."""
    if dev.sink is not None:
        dev.sink.put(floats, flags)
        return
    groups, mode = (grid(n), ()) if table_grid is None else (table_grid, (1,))
    if dev.capture is None:
        dev.launch("optim", (rule, 0, *mode) if mode else (rule,),
                   _PUSH.pack(*addrs, n, flags, *floats), groups, reads, writes)
        return
    slot = dev.capture.slot(floats, flags)
    push = push_constants(addrs, (n, 0), [0.0] * len(floats)) + struct.pack("<4xQ", slot)
    dev.launch("optim", (rule, 1, *mode), push, groups, reads, writes)
