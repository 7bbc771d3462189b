"""Composed steps: ``A+B+extra:NAME``, several inputs that a worker merges into one broadcast.

A step spec joins parts with ``+``, in the order the receiving ranks consume them:

* ``module:Class`` -- an input class; the driver merges its
  ``as_broadcastable_tensor_dict()`` into the step's dict, receivers call its
  ``from_broadcasted_tensor_dict()`` on that same dict;
* ``extra:NAME`` or ``extra:NAME=TYPE`` -- a key the worker adds to the merged dict
  itself (``broadcast_data.update(...)``); receivers pop it at this position.

Extras may also be declared for every step with ``--extra NAME[=TYPE]`` or
``fuzz_extras = {NAME = "TYPE"}`` in ``[tool.runnercheck]``; a step that does not name
such an extra pops it after its last part. TYPE is ``tensor`` (the default), ``int``,
``float``, ``bool``, ``str``, ``bytes``, or ``module:attr`` naming a type or annotation.
The driver merges the class parts in order, then the extras.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from runnercheck.contract import Contract
from runnercheck.errors import UsageError
from runnercheck.fuzz.targets import SweptStep, Target, Unrunnable, resolve

#: The prefix of an extra part in a step spec.
EXTRA_PREFIX = "extra:"

#: Extra types named by a word.
EXTRA_TYPES: dict[str, Any] = {
    "tensor": torch.Tensor,
    "int": int,
    "float": float,
    "bool": bool,
    "str": str,
    "bytes": bytes,
}

DEFAULT_EXTRA_TYPE = "tensor"


@dataclass(frozen=True)
class StepPart:
    """One part of a step: an input class (``cls``) or an extra key (``key``)."""

    #: How reports name the part: the class's name, or the extra's key.
    label: str
    cls: type | None = None
    key: str = ""
    #: The extra's TYPE as written (``tensor``, ``int``, ``module:attr``).
    type_text: str = ""
    #: How the step names the class (``module:Class``).
    spec: str = ""

    @property
    def is_extra(self) -> bool:
        return self.cls is None


@dataclass(frozen=True)
class Step:
    """A composed step: its parts in the receiving order."""

    parts: tuple[StepPart, ...]
    #: The canonical spec (every extra with its type): reports and replay commands use it.
    name: str
    sys_path: tuple[str, ...] = ()
    #: Found by sweeping a path: a step that cannot run is one line, not the run's end.
    swept: bool = False

    @property
    def extras(self) -> list[StepPart]:
        return [p for p in self.parts if p.is_extra]


def is_step_spec(spec: str) -> bool:
    return "+" in spec and not Path(spec).exists()


def parse_extra(text: str, where: str) -> tuple[str, str]:
    """``NAME`` or ``NAME=TYPE`` -> (name, type text); the type defaults to tensor."""
    name, equals, type_text = text.partition("=")
    name, type_text = name.strip(), type_text.strip()
    if not name:
        raise UsageError(f"{where}: an extra needs a name (NAME or NAME=TYPE)")
    if equals and not type_text:
        raise UsageError(f"{where}: extra {name!r} has an empty type")
    type_text = type_text or DEFAULT_EXTRA_TYPE
    check_extra_type(type_text, f"{where}: extra {name!r}")
    return name, type_text


def check_extra_type(type_text: str, where: str) -> None:
    if type_text in EXTRA_TYPES:
        return
    module, colon, attr = type_text.partition(":")
    if not (module and colon and attr):
        words = ", ".join(EXTRA_TYPES)
        raise UsageError(f"{where}: unknown type {type_text!r} (one of {words}, or module:attr)")


def extra_annotation(type_text: str, where: str) -> Any:
    """The annotation an extra's values are generated from."""
    if type_text in EXTRA_TYPES:
        return EXTRA_TYPES[type_text]
    module_name, _, attr = type_text.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:
        raise UsageError(
            f"{where}: cannot load type {type_text!r}: {type(exc).__name__}: {exc}"
        ) from None
    return obj


def declared_extras(options: Sequence[str], configured: Mapping[str, str]) -> dict[str, str]:
    """Extras of every step: ``fuzz_extras`` from the configuration, then ``--extra``
    (which wins for the same name); name -> type text."""
    extras: dict[str, str] = {}
    for name, type_text in configured.items():
        check_extra_type(type_text, f"[tool.runnercheck] fuzz_extras: extra {name!r}")
        extras[name] = type_text
    for text in options:
        name, type_text = parse_extra(text, f"--extra {text!r}")
        extras[name] = type_text
    return extras


def resolve_step(spec: str, contract: Contract, extras: Mapping[str, str] | None = None) -> Step:
    """The step a spec names; ``extras`` (declared for every step) that the spec does
    not name are popped after its last part."""
    extras = dict(extras or {})
    parts: list[StepPart] = []
    sys_path: list[str] = []
    seen_classes: set[type] = set()
    seen_keys: set[str] = set()
    for raw in spec.split("+"):
        text = raw.strip()
        where = f"step {spec!r}"
        if not text:
            raise UsageError(f"{where}: empty part (parts are joined with '+')")
        if text.startswith(EXTRA_PREFIX):
            name, equals, _ = text[len(EXTRA_PREFIX) :].partition("=")
            if equals:
                name, type_text = parse_extra(text[len(EXTRA_PREFIX) :], where)
            else:
                name, type_text = parse_extra(name, where)
                type_text = extras.get(name.strip(), type_text)
            if name in seen_keys:
                raise UsageError(f"{where}: extra {name!r} appears twice")
            seen_keys.add(name)
            parts.append(StepPart(name, key=name, type_text=type_text))
            continue
        if ":" not in text:
            raise UsageError(f"{where}: part {text!r} must name one class (module:Class)")
        [target] = resolve(text, contract)
        assert isinstance(target, Target)  # module:Class names one class or raises
        if target.cls in seen_classes:
            raise UsageError(f"{where}: {text} appears twice")
        seen_classes.add(target.cls)
        sys_path.extend(p for p in target.sys_path if p not in sys_path)
        parts.append(StepPart(target.cls.__qualname__, cls=target.cls, spec=target.name))
    for name, type_text in extras.items():
        if name not in seen_keys:
            parts.append(StepPart(name, key=name, type_text=type_text))
    if not any(not p.is_extra for p in parts):
        raise UsageError(f"step {spec!r}: no input class among its parts")
    _unique_labels(parts, spec)
    return Step(tuple(parts), _canonical(parts), tuple(sys_path))


def _unique_labels(parts: list[StepPart], spec: str) -> None:
    labels = [p.label for p in parts]
    for i, part in enumerate(parts):
        if labels.count(part.label) > 1:
            if part.cls is None:
                raise UsageError(
                    f"step {spec!r}: extra {part.key!r} has the name of a class in the step"
                )
            parts[i] = StepPart(part.spec.replace(":", "."), cls=part.cls, spec=part.spec)


def _canonical(parts: Sequence[StepPart]) -> str:
    texts = []
    for part in parts:
        if part.cls is not None:
            texts.append(part.spec)
        else:
            texts.append(f"{EXTRA_PREFIX}{part.key}={part.type_text}")
    return "+".join(texts)


def resolve_targets(
    specs: Sequence[str], contract: Contract, extras: Mapping[str, str] | None = None
) -> list[Target | Step | Unrunnable]:
    """Every target in order: steps for ``A+B`` specs, else each class once (a class of
    a swept path that cannot run, as an :class:`Unrunnable`), and the composed steps a
    swept path holds."""
    seen: set[type] = set()
    seen_steps: set[str] = set()
    result: list[Target | Step | Unrunnable] = []
    for spec in specs:
        if is_step_spec(spec):
            step = resolve_step(spec, contract, extras)
            if step.name not in seen_steps:
                seen_steps.add(step.name)
                result.append(step)
            continue
        for target in resolve(spec, contract):
            if isinstance(target, SweptStep):
                if target.spec in seen_steps:
                    continue
                seen_steps.add(target.spec)
                try:
                    found = resolve_step(target.spec, contract, extras)
                except UsageError as exc:
                    result.append(Unrunnable(target.spec, str(exc)))
                else:
                    result.append(replace(found, swept=True))
            elif isinstance(target, Unrunnable):
                result.append(target)
            elif target.cls not in seen:
                seen.add(target.cls)
                result.append(target)
    return result
