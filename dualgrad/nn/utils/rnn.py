"""``dg.nn.utils.rnn.pad_sequence``, as PyTorch's (the packed-sequence types are not
offered: the recurrent layers take padded batches)."""
from __future__ import annotations

from ...api.indexing import pad, stack
from ...api.ops import _tensor
from ...api import checks
from ...errors import InvalidValueError, ShapeError


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right"):
    """Tensors of shape (L_i, *) stacked into (L_max, N, *) (``batch_first``: (N, L_max,
    *)), each padded with ``padding_value`` at its end (``padding_side="left"``: its
    start)."""
    fn = "pad_sequence"
    items = [_tensor(fn, f"sequences[{k}]", s) for k, s in enumerate(sequences)]
    if not items:
        raise InvalidValueError("pad_sequence: argument 'sequences' is empty; expected at "
                                "least one tensor")
    batch_first = checks.flag(fn, "batch_first", batch_first)
    value = checks.number(fn, "padding_value", padding_value)
    if padding_side not in ("right", "left"):
        raise InvalidValueError(f"pad_sequence: argument 'padding_side' is "
                                f"{padding_side!r}; expected 'right' or 'left'")
    rest = items[0].shape[1:]
    for k, t in enumerate(items):
        if t.ndim == 0 or t.shape[1:] != rest:
            raise ShapeError(f"pad_sequence: sequences[{k}] has shape {t.shape}; expected "
                             f"(L, {', '.join(map(str, rest))})" if rest else
                             f"pad_sequence: sequences[{k}] has shape {t.shape}; expected (L,)")
    longest = max(t.shape[0] for t in items)
    padded = []
    for t in items:
        extra = longest - t.shape[0]
        widths = (0, 0) * len(rest) + ((0, extra) if padding_side == "right" else (extra, 0))
        padded.append(pad(t, widths, value=value) if extra else t)
    return stack(padded, 0 if batch_first else 1)


__all__ = ["pad_sequence"]
