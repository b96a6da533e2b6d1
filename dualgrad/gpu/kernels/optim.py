"""optim.comp: fused Adam and SGD updates in place, one tensor a dispatch or, through a
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

from ...kernel_ops import ADAM_HYPER, OPTIM, OPTIM_SCALARS, SGD_FLAGS, SGD_HYPER
from ..dispatch import WG, grid, packer, push_constants

ADAM, SGD = OPTIM.codes("adam", "sgd")
_FLAG = dict(SGD_FLAGS)
_PUSH = packer(4, 2, OPTIM_SCALARS)    # w, g, m (buf), v; n, flags; the scalars
MAX_TABLE = 256                   # tensors a table dispatch updates, at most
TABLE_GROUPS = 32768              # about this many workgroups a table dispatch, at most
TABLE_ENTRY = struct.Struct("<4Q4I")    # addresses, n, first workgroup, chunk, unused
MAX_TABLES_KEPT = 16              # tables kept for reuse (an optimizer's, or a few of them
                                  # taking turns); past that, the kept ones are dropped


def _sgd_scalars(buf, hyper: dict) -> tuple:
    """(flags, the scalars) of optim.comp's SGD update."""
    flags = (_FLAG["flag_buffer"] if buf is not None else 0) | \
        (_FLAG["flag_nesterov"] if hyper["nesterov"] else 0) | \
        (_FLAG["flag_first"] if hyper["first"] else 0)
    return flags, [hyper[k] for k in SGD_HYPER] + [0.0] * (OPTIM_SCALARS - len(SGD_HYPER))


def adam_step(dev, w, g, m, v, hyper) -> None:
    if w.size:
        floats = [hyper[k] for k in ADAM_HYPER]
        _dispatch(dev, ADAM, (w.address, g.address, m.address, v.address), w.size, 0, floats,
                  [w, g, m, v], [w, m, v])


def adam_steps(dev, params, hyper) -> None:
    """Every (w, g, m, v) of ``params`` in one dispatch (``_steps``)."""
    floats = [hyper[k] for k in ADAM_HYPER]
    _steps(dev, ADAM, [((w, g, m, v), (w, m, v)) for w, g, m, v in params if w.size], 0,
           floats, lambda w, g, m, v: adam_step(dev, w, g, m, v, hyper))


def sgd_step(dev, w, g, buf, hyper) -> None:
    if w.size:
        flags, floats = _sgd_scalars(buf, hyper)
        _dispatch(dev, SGD, (w.address, g.address, buf.address if buf is not None else 0, 0),
                  w.size, flags, floats, [w, g, buf], [w] + ([buf] if buf is not None else []))


def sgd_steps(dev, params, hyper) -> None:
    """Every (w, g, buf) of ``params`` in one dispatch (``_steps``) for those with a
    momentum buffer and one for those without."""
    for with_buf in (True, False):
        part = [((w, g, buf), (w, buf) if with_buf else (w,)) for w, g, buf in params
                if w.size and (buf is not None) == with_buf]
        if part:
            flags, floats = _sgd_scalars(part[0][0][2], hyper)
            _steps(dev, SGD, part, flags, floats,
                   lambda w, g, buf: sgd_step(dev, w, g, buf, hyper))


def _steps(dev, kind, tensors, flags, floats, alone) -> None:
    """Updates of optim.comp's KIND sharing ``floats`` and ``flags``: ``tensors`` holds
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
            _dispatch(dev, kind, (table.address, 0, 0, 0), len(part), flags, floats,
                      [table] + [h for operands, _ in part for h in operands],
                      [h for _, written in part for h in written], groups)


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
        addrs = [h.address if h is not None else 0 for h in q] + [0] * (4 - len(q))
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


def _dispatch(dev, kind, addrs, n, flags, floats, reads, writes, table_grid=None) -> None:
    """One optim.comp dispatch of the four operands at ``addrs`` (0: none), or with
    ``table_grid`` a TABLE dispatch of that grid over the table at addrs[0], of n entries.
    While a step is recorded, the scalars and flags go to a slot of the recording's scalar
    buffer (rewritten before each replay); while a replay's hooks run, they only fill the
    next slot."""
    if dev.sink is not None:
        dev.sink.put(floats, flags)
        return
    groups, mode = (grid(n), ()) if table_grid is None else (table_grid, (1,))
    if dev.capture is None:
        dev.launch("optim", (kind, 0, *mode) if mode else (kind,),
                   _PUSH.pack(*addrs, n, flags, *floats), groups, reads, writes)
        return
    slot = dev.capture.slot(floats, flags)
    push = push_constants(addrs, (n, 0), [0.0] * len(floats)) + struct.pack("<4xQ", slot)
    dev.launch("optim", (kind, 1, *mode), push, groups, reads, writes)
