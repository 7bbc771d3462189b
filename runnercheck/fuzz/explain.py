"""What an exception raised while an example was made tells about its cause.

A class whose field's default cannot be made (vLLM 0.9.2's multi-step input makes
``[current_platform.Event(blocking=True)] * 2``, and on a machine where the engine
detects no accelerator its platform gives None for ``Event``) cannot be built on any
rank. The error names the field whose default raised, and, for a call of None, the
expression that is None in this process, so that the one line says why the class
cannot run.
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import types
from typing import Any

#: What calling None raises.
_NONE_CALLED = "'NoneType' object is not callable"


def explain(exc: BaseException) -> str:
    """``; the default of field 'F' of C raised it`` and ``: `EXPR` is None in this
    process`` where the traceback shows them ("" when it shows neither)."""
    frames = _frames(exc.__traceback__)
    parts = []
    field = _failing_default(frames)
    if field is not None:
        parts.append(f"; the default of field {field[1]!r} of {field[0].__qualname__} raised it")
    if isinstance(exc, TypeError) and _NONE_CALLED in str(exc) and frames:
        callee = _none_callee(*frames[-1])
        if callee is not None:
            parts.append(f"; `{callee}` is None in this process")
    return "".join(parts)


def _frames(tb: types.TracebackType | None) -> list[tuple[types.FrameType, int]]:
    """Each frame of a traceback with the index of its last instruction, outermost
    first."""
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lasti))
        tb = tb.tb_next
    return out


def _failing_default(frames: list[tuple[types.FrameType, int]]) -> tuple[type, str] | None:
    """The dataclass and field whose ``default_factory`` is the innermost frame that
    is one (found through the name of the class in the factory's module; Python 3.11
    on, where code knows its qualified name)."""
    for frame, _ in reversed(frames):
        code = frame.f_code
        owner = getattr(code, "co_qualname", "").rpartition(".")[0]
        cls = frame.f_globals.get(owner.partition(".")[0]) if owner else None
        for name in owner.split(".")[1:]:
            cls = getattr(cls, name, None)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            continue
        for f in dataclasses.fields(cls):
            if getattr(f.default_factory, "__code__", None) is code:
                return cls, f.name
    return None


def _none_callee(frame: types.FrameType, lasti: int) -> str | None:
    """The callee (a dotted name) of the call the frame was making, when it is None
    (instruction positions are known from Python 3.11 on; before, nothing is said)."""
    co_positions = getattr(frame.f_code, "co_positions", None)
    if co_positions is None:
        return None
    positions = list(co_positions())
    index = lasti // 2
    if not 0 <= index < len(positions):
        return None
    line, end_line, col, end_col = positions[index]
    if line is None or line != end_line or col is None or end_col is None:
        return None
    text = linecache.getline(frame.f_code.co_filename, line)[col:end_col]
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call):
        return None
    names = _dotted(node.func)
    if names is None:
        return None
    found = _lookup(frame, names)
    return ".".join(names) if found is None else None


def _dotted(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return [*head, node.attr] if head is not None else None
    return None


_MISSING = object()


def _lookup(frame: types.FrameType, names: list[str]) -> Any:
    """The value of ``a.b.c`` in the frame (its locals, globals, builtins); a value that
    cannot be found is not None (nothing is said of it)."""
    scopes = (frame.f_locals, frame.f_globals, frame.f_builtins)
    value = next((scope[names[0]] for scope in scopes if names[0] in scope), _MISSING)
    for name in names[1:]:
        if value is _MISSING:
            break
        try:
            value = getattr(value, name)
        except Exception:
            value = _MISSING
    return value
