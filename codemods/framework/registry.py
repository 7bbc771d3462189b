"""The one list of codemods: their names, what each rewrites, and the LibCST command
behind it. The pipeline, ``runnercheck migrate --help``, the demo and the README's
table all read it. Light to import (no LibCST)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Codemod:
    #: The name ``--select`` takes.
    name: str
    #: The module holding its LibCST command and rewrite.
    module: str
    #: The LibCST command class (``python -m libcst.tool codemod -x MODULE.COMMAND``).
    command: str
    #: One line for ``--help`` and the command's ``DESCRIPTION``.
    summary: str
    #: What it rewrites, for the README.
    rewrites: str
    #: The codes whose findings it fixes (``runnercheck rules`` shows it beside them).
    fixes: tuple[str, ...] = ()


MERGE_BROADCASTS = Codemod(
    name="merge-broadcasts",
    module="codemods.merge_broadcasts",
    command="MergeBroadcastsCommand",
    summary="one broadcast per step: an input dataclass per runner, prepare_model_input / "
    "make_model_input_from_broadcasted_tensor_dict / execute_model(model_input, kv_caches), "
    "driven by the worker (worker + runners, across files)",
    rewrites="a worker and the runners it drives, across files: an input dataclass (frozen) "
    "per runner with `as_broadcastable_tensor_dict` / classmethod "
    "`from_broadcasted_tensor_dict`, `prepare_model_input` (driver, no communication) / "
    "`make_model_input_from_broadcasted_tensor_dict`, `execute_model(model_input, "
    "kv_caches)`, a worker input dataclass, one broadcast per step driven by the worker "
    "(stop signal kept), and `model_runner_base.py` when the package has none",
    fixes=("RC106",),
)
SELF_RETURN = Codemod(
    name="self-return",
    module="codemods.self_return",
    command="SelfReturnCommand",
    summary="from_broadcasted_tensor_dict returns Self or a cls-bound TypeVar, and builds "
    "cls(...) instead of ClassName(...)",
    rewrites="a fixed-class return of `from_broadcasted_tensor_dict` becomes a `cls`-bound "
    "TypeVar, `ClassName(...)` becomes `cls(...)`",
    fixes=("RC202",),
)
DRIVER_ONLY = Codemod(
    name="driver-only",
    module="codemods.driver_only",
    command="DriverOnlyCommand",
    summary="declare the input fields that are never broadcast (exactly what RC103 reports)",
    rewrites="fields that are never broadcast (RC103) get a `# Driver-only: ...` comment above them",
    fixes=("RC103",),
)
SUPER_DICT = Codemod(
    name="super-dict",
    module="codemods.super_dict",
    command="SuperDictCommand",
    summary="a subclass dict that re-lists its parent's keys calls super() (RC104)",
    rewrites="a subclass dict that re-lists its parent's keys (RC104) calls `super()` and "
    "adds its own",
    fixes=("RC104",),
)
FOLD_CONTROL_BROADCAST = Codemod(
    name="fold-control-broadcast",
    module="codemods.fold_control_broadcast",
    command="FoldControlBroadcastCommand",
    summary="a wrapper worker's control dict travels in its first inner step's broadcast "
    "(RC110): k+1 broadcasts per speculative decode step instead of k+2",
    rewrites="a wrapper worker (speculative decoding) that broadcasts its own control dict "
    "before its inner workers' steps (RC110): the driver puts the values in the request's "
    "`broadcast_extras`, the other ranks read them from the first inner step's "
    "`received_extras`, and the first inner step's loop runs once less",
    fixes=("RC110",),
)

#: Every codemod, in the order they run.
CODEMODS: tuple[Codemod, ...] = (
    MERGE_BROADCASTS,
    SELF_RETURN,
    DRIVER_ONLY,
    SUPER_DICT,
    FOLD_CONTROL_BROADCAST,
)
NAMES: tuple[str, ...] = tuple(codemod.name for codemod in CODEMODS)
#: The single-class codemods (they run on every file the analysis flags).
SINGLE: tuple[str, ...] = tuple(c.name for c in CODEMODS if c is not MERGE_BROADCASTS)


def get(name: str) -> Codemod:
    for codemod in CODEMODS:
        if codemod.name == name:
            return codemod
    raise KeyError(name)


def command_class(module: str, name: str) -> Any:
    """The LibCST command ``name`` that a single-class codemod's ``module`` names
    (``python -m libcst.tool codemod -x codemods.self_return.SelfReturnCommand``). The
    commands live in :mod:`codemods.framework.command`, with LibCST's codemod framework, which
    ``migrate`` does not load: a codemod module hands them out on first use."""
    if any(c.module == module and c.command == name for c in CODEMODS):
        from codemods.framework import command

        return getattr(command, name)
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


def help_lines(width: int = 0, columns: int = 88) -> str:
    """The codemods for ``--help``: name, then the summary wrapped beside it (in a column
    ``width`` wide, the longest name and two spaces when 0)."""
    width = width or max(len(c.name) for c in CODEMODS) + 2
    indent = " " * (2 + width)
    blocks = [
        textwrap.fill(
            c.summary,
            columns,
            initial_indent=f"  {c.name:<{width}}",
            subsequent_indent=indent,
        )
        for c in CODEMODS
    ]
    return "\n".join(blocks)


def markdown_table() -> str:
    """The README's codemod table."""
    lines = ["| codemod | rewrites |", "| --- | --- |"]
    lines += [f"| `{c.name}` | {c.rewrites} |" for c in CODEMODS]
    return "\n".join(lines)
