"""Field-by-field comparison of snapshots: what a receiving rank rebuilt against what was sent.

Every difference names the path of the value (``lora_mapping``,
``attn_metadata.slot_mapping``, ``multi_modal_kwargs['pixel_values']``,
``seq_lens[2]``), the aspect that differs (type, dtype, shape, device, value,
length, keys) and both sides in short text. A dataclass field that arrives as its
default (or not at all) while something else was sent is *lost*; driver-only fields
are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from runnercheck.fuzz.snapshot import (
    Entries,
    Items,
    Members,
    Missing,
    Opaque,
    Plain,
    Record,
    Snap,
    TensorSnap,
    same_plain,
    snapshot,
    unchanged,
)

#: Differences reported per comparison at most (the first ones found).
LIMIT = 8


@dataclass(frozen=True)
class Difference:
    path: str
    aspect: str
    expected: str
    actual: str
    lost: bool = False

    def change(self) -> str:
        """What changed, without the path."""
        if self.lost:
            return f"sent {self.expected}, received {self.actual}"
        aspect = "" if self.aspect in ("type", "value") else f"{self.aspect} "
        return f"{aspect}{self.expected} -> {self.actual}"

    def text(self) -> str:
        return f"{self.path}: {self.change()}" if self.path else self.change()

    @property
    def field(self) -> str:
        """The top-level field (first path component)."""
        for i, char in enumerate(self.path):
            if char in ".[":
                return self.path[:i]
        return self.path


def differences(
    expected: Snap, actual: Snap, path: str = "", limit: int = LIMIT
) -> list[Difference]:
    """What differs between two snapshots (empty: equal)."""
    found: list[Difference] = []
    _compare(expected, actual, path, found, limit)
    return found[:limit]


def changes(before: Snap, value: Any, path: str = "") -> list[Difference]:
    """What differs between ``before`` and a snapshot of ``value`` now: the same as
    ``differences(before, snapshot(value))``, without taking that snapshot where
    ``value`` still has ``before`` (the common case of the checks that nothing changed)."""
    if unchanged(before, value):
        return []
    return differences(before, snapshot(value), path)


def equal(a: Snap, b: Snap) -> bool:
    return not differences(a, b, limit=1)


def _add(found: list[Difference], diff: Difference) -> None:
    found.append(diff)


def _compare(exp: Snap, act: Snap, path: str, found: list[Difference], limit: int) -> None:
    if len(found) >= limit or exp == act:  # strict equality: nothing differs
        return
    if isinstance(exp, Missing) or isinstance(act, Missing):
        if not (isinstance(exp, Missing) and isinstance(act, Missing)):
            _add(found, Difference(path, "value", describe(exp), describe(act), lost=True))
        return
    if exp.type != act.type or exp.kind != act.kind:
        _add(found, Difference(path, "type", _typed(exp), _typed(act)))
        if exp.kind != act.kind:
            return
    if isinstance(exp, Plain) and isinstance(act, Plain):
        if exp.type == act.type and not same_plain(exp.value, act.value):
            _add(found, Difference(path, "value", describe(exp), describe(act)))
    elif isinstance(exp, TensorSnap) and isinstance(act, TensorSnap):
        _compare_tensors(exp, act, path, found)
    elif isinstance(exp, Items) and isinstance(act, Items):
        if len(exp.items) != len(act.items):
            _add(found, Difference(path, "length", str(len(exp.items)), str(len(act.items))))
            return
        for i, (e, a) in enumerate(zip(exp.items, act.items, strict=True)):
            _compare(e, a, f"{path}[{i}]", found, limit)
    elif isinstance(exp, Members) and isinstance(act, Members):
        if [m.key() for m in exp.items] != [m.key() for m in act.items]:
            _add(found, Difference(path, "value", describe(exp), describe(act)))
    elif isinstance(exp, Entries) and isinstance(act, Entries):
        _compare_entries(exp, act, path, found, limit)
    elif isinstance(exp, Record) and isinstance(act, Record):
        _compare_records(exp, act, path, found, limit)
    elif isinstance(exp, Opaque) and isinstance(act, Opaque):
        if exp.text != act.text:
            _add(found, Difference(path, "value", describe(exp), describe(act)))


def _typed(snap: Snap) -> str:
    text = describe(snap)
    short = snap.type.rsplit(".", 1)[-1]
    return (
        text if text.startswith(short) or short in ("NoneType", "Tensor") else f"{text} ({short})"
    )


def _compare_tensors(exp: TensorSnap, act: TensorSnap, path: str, found: list[Difference]) -> None:
    if exp.device != act.device:
        _add(found, Difference(path, "device", exp.device, act.device))
    if exp.dtype != act.dtype:
        _add(found, Difference(path, "dtype", exp.dtype, act.dtype))
        return
    if exp.shape != act.shape:
        _add(found, Difference(path, "shape", _shape(exp.shape), _shape(act.shape)))
        return
    if exp.digest != act.digest:
        _add(found, Difference(path, "value", *_first_tensor_difference(exp, act)))


def _first_tensor_difference(exp: TensorSnap, act: TensorSnap) -> tuple[str, str]:
    a, b = exp.data, act.data
    if a is None or b is None:
        return "<bytes>", "<other bytes>"
    if a.is_floating_point():
        unequal = (a != b) & ~(torch.isnan(a) & torch.isnan(b))
    else:
        unequal = a != b
    count = int(unequal.sum())
    if count == 0:  # same numbers, other bits (e.g. -0.0 vs 0.0, NaN payloads)
        unequal = _bits(a) != _bits(b)
        count = int(unequal.sum())
    if count == 0:
        return "<bytes>", "<other bytes>"
    index = tuple(int(i) for i in unequal.nonzero()[0]) if a.dim() else ()
    where = f" at {list(index)}" if index else ""
    of = f" ({count} of {a.numel()} elements differ)"
    return f"{_scalar(a[index] if index else a)}{where}", f"{_scalar(b[index] if index else b)}{of}"


def _bits(t: torch.Tensor) -> torch.Tensor:
    width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(width)


def _scalar(t: torch.Tensor) -> str:
    return repr(t.item())


def _compare_entries(
    exp: Entries, act: Entries, path: str, found: list[Difference], limit: int
) -> None:
    exp_map = {k.key(): (k, v) for k, v in exp.entries}
    act_map = {k.key(): (k, v) for k, v in act.entries}
    for key, (k, v) in exp_map.items():
        sub = f"{path}[{describe(k)}]"
        if key not in act_map:
            _add(found, Difference(sub, "value", describe(v), "<missing key>", lost=True))
        else:
            _compare(v, act_map[key][1], sub, found, limit)
    for key, (k, v) in act_map.items():
        if key not in exp_map:
            _add(found, Difference(f"{path}[{describe(k)}]", "keys", "<absent>", describe(v)))


_MISSING = Missing()


def _compare_records(
    exp: Record, act: Record, path: str, found: list[Difference], limit: int
) -> None:
    actual = act.field_map()
    defaults = dict(exp.defaults)
    for name, value in exp.fields:
        if name in exp.driver_only:
            continue
        got = actual.get(name, _MISSING)
        if value == got:
            continue
        sub = f"{path}.{name}" if path else name
        inner = differences(value, got, sub, limit)
        if not inner:
            continue
        default = defaults.get(name)
        if isinstance(got, Missing) or (default is not None and equal(default, got)):
            suffix = " (the field's default)" if not isinstance(got, Missing) else ""
            _add(found, Difference(sub, "value", describe(value), describe(got) + suffix, True))
        else:
            for diff in inner:
                _add(found, diff)


# ------------------------------------------------------------------ text

MAX_TEXT = 120


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def describe(snap: Snap, depth: int = 0) -> str:
    """Short text for a snapshot (used in messages)."""
    text = _describe(snap, depth)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _describe(snap: Snap, depth: int) -> str:
    if isinstance(snap, Missing):
        return "<missing>"
    if isinstance(snap, Plain):
        if snap.type.startswith("torch.") or snap.type in ("str", "bytes", "int", "float", "bool"):
            return repr(snap.value) if not snap.type.startswith("torch.") else str(snap.value)
        if snap.type == "NoneType":
            return "None"
        return (
            f"{snap.type.rsplit('.', 1)[-1]}.{snap.value}"
            if isinstance(snap.value, str)
            else repr(snap.value)
        )
    if isinstance(snap, TensorSnap):
        values = ""
        if snap.data is not None and 0 < snap.data.numel() <= 6:
            values = repr(snap.data.tolist()) + ", "
        layout = "" if snap.contiguous else ", non-contiguous"
        return f"tensor({values}{snap.dtype}, shape {_shape(snap.shape)}, {snap.device}{layout})"
    if depth > 2:
        return "..."
    if isinstance(snap, Items):
        inner = ", ".join(_describe(item, depth + 1) for item in snap.items[:6])
        more = ", ..." if len(snap.items) > 6 else ""
        if snap.type == "tuple":
            return f"({inner}{more}{',' if len(snap.items) == 1 else ''})"
        body = f"[{inner}{more}]"
        return body if snap.type == "list" else f"{snap.type}({body})"
    if isinstance(snap, Members):
        inner = ", ".join(_describe(item, depth + 1) for item in snap.items[:6])
        return f"{snap.type}({{{inner}}})" if snap.items else f"{snap.type}()"
    if isinstance(snap, Entries):
        inner = ", ".join(
            f"{_describe(k, depth + 1)}: {_describe(v, depth + 1)}" for k, v in snap.entries[:6]
        )
        body = f"{{{inner}}}"
        return body if snap.type == "dict" else f"{snap.type}({body})"
    if isinstance(snap, Record):
        short = snap.type.rsplit(".", 1)[-1]
        inner = ", ".join(f"{n}={_describe(v, depth + 1)}" for n, v in snap.fields[:8])
        return f"{short}({inner})"
    if isinstance(snap, Opaque):
        return snap.text
    return "?"
