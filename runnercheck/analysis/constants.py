"""Constants and the branches they decide: which code of a step can run at all.

A rank's path through a method depends on values known before it runs: literal
arguments carried into callees (``self._add_dummy_seq(seqs, False)`` makes ``if
align_worker:`` dead in that call), literal parameter defaults, and attributes of
``self`` that are constant for a class: a class attribute (``do_metadata_broadcast =
False``), a property that returns a literal, a ``self.X = <literal>`` that is the only
assignment of X, each inherited along the MRO.

:class:`Constants` is one named part of the project view: it answers those questions
for the step walk, the merged dict and the rules. Values are the literals' ``repr``
(``"False"``, ``"None"``, ``"3"``, ``"'dummy'"``); :data:`UNKNOWN` is anything else.
"""

from __future__ import annotations

from collections.abc import Mapping

from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.model import BranchStep, CallSite, CallStep, ClassFacts, Condition, Guard

#: A value that is not a known literal.
UNKNOWN = "?"

#: Name -> literal ``repr`` (or :data:`UNKNOWN`): parameters of the function being walked,
#: and ``self.X`` constants of the class it runs on.
Bindings = Mapping[str, str]


_NAMED: dict[str, object] = {"True": True, "False": False, "None": None}


def _value(text: str) -> object:
    """The value of a literal's ``repr`` (as :func:`~runnercheck.analysis.syntax.
    literal_text` writes it), read without parsing Python again."""
    if text in _NAMED:
        return _NAMED[text]
    if text.lstrip("-").isdigit():
        return int(text)
    return text[1:-1]  # a string's repr: compared with another repr's inside


def holds(guard: Guard, bindings: Bindings) -> bool | None:
    """Whether the guard holds under ``bindings`` (None: cannot be told)."""
    text = bindings.get(guard.name, UNKNOWN)
    if text == UNKNOWN:
        return None
    value = _value(text)
    if guard.op == "truthy":
        return bool(value)
    if guard.op == "falsy":
        return not value
    other = _value(guard.value)
    if guard.op == "is":
        return value is other if other is None or isinstance(other, bool) else value == other
    if guard.op == "is not":
        return not (value is other if other is None or isinstance(other, bool) else value == other)
    if guard.op == "==":
        return bool(value == other)
    if guard.op == "!=":
        return bool(value != other)
    return None


def branch_taken(
    guards: tuple[Guard, ...], complete: bool, bindings: Bindings
) -> tuple[bool, bool]:
    """(the body may run, the ``else`` may run) for an ``if`` with these guards."""
    if not guards:
        return True, True
    results = [holds(g, bindings) for g in guards]
    then_ok = all(r is not False for r in results)
    else_ok = not (complete and all(r is True for r in results))
    return then_ok, else_ok


def branch_reachable(step: BranchStep, bindings: Bindings) -> tuple[bool, bool]:
    return branch_taken(step.guards, step.complete, bindings)


def conditions_hold(conditions: tuple[Condition, ...], bindings: Bindings) -> bool:
    """A statement under these ``if`` conditions may run under ``bindings``."""
    for condition in conditions:
        then_ok, else_ok = branch_taken(condition.guards, condition.complete, bindings)
        if not (then_ok if condition.then else else_ok):
            return False
    return True


def call_bindings(
    call: CallStep | CallSite, callee: MethodRef, caller: Bindings, self_bound: bool
) -> dict[str, str]:
    """The callee's parameters bound by a call: a literal argument, a name the caller
    knows, else the parameter's literal default; everything else unknown."""
    func = callee.func
    params = func.params[1:] if self_bound else func.params
    out: dict[str, str] = {}
    for name in (*params, *func.param_defaults):
        if name in func.param_defaults:
            out[name] = func.param_defaults[name]

    def value(text: str) -> str:
        if not text:
            return UNKNOWN
        if text[0] in "'\"-0123456789" or text in ("True", "False", "None"):
            return text
        return caller.get(text, UNKNOWN)

    for index, text in enumerate(call.args):
        if index < len(params):
            out[params[index]] = value(text)
    for keyword, text in call.kwargs:
        out[keyword] = value(text)
    return out


class Constants:
    """``self.X`` constants per class, read from a class hierarchy."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self._memo: dict[tuple[int, str], str] = {}
        self._bindings: dict[int, dict[str, str]] = {}

    def self_constant(self, cls: ClassFacts, attr: str) -> str:
        """The literal ``self.<attr>`` always holds on an instance of ``cls``, else
        :data:`UNKNOWN`: the first definition along the MRO (a property returning a
        literal, a class-level literal), agreeing with every ``self.<attr> = ...`` in
        the methods ``cls`` has."""
        key = (id(cls), attr)
        found = self._memo.get(key)
        if found is None:
            found = self._read(cls, attr)
            self._memo[key] = found
        return found

    def _read(self, cls: ClassFacts, attr: str) -> str:
        h = self.hierarchy
        declared: str | None = None
        for klass in h.mro(cls):
            method = klass.methods.get(attr)
            if method is not None:
                if not method.is_property or method.constant_return is None:
                    return UNKNOWN
                declared = method.constant_return
                break
            if attr in klass.class_constants:
                declared = klass.class_constants[attr]
                break
            if attr in klass.class_attrs:
                return UNKNOWN
        names = {name for klass in h.mro(cls) for name in klass.methods}
        for name in names:
            ref = h.resolve_method(cls, name)
            assigned = ref.func.self_constants.get(attr) if ref is not None else None
            if assigned is None:
                continue
            if assigned == UNKNOWN or (declared is not None and assigned != declared):
                return UNKNOWN
            declared = assigned
        if declared is None and h.unknown_bases(cls):
            return UNKNOWN
        return declared if declared is not None else UNKNOWN

    def self_bindings(self, cls: ClassFacts, self_name: str = "self") -> dict[str, str]:
        """``self.X`` -> literal for every X tested by a guard in the class's methods."""
        cached = self._bindings.get(id(cls))
        if cached is None:
            cached = {}
            for klass in self.hierarchy.mro(cls):
                for method in klass.methods.values():
                    for attr in _tested_self_attrs(method.steps):
                        value = self.self_constant(cls, attr)
                        if value != UNKNOWN:
                            cached[f"self.{attr}"] = value
            self._bindings[id(cls)] = cached
        if self_name == "self":
            return cached
        return {f"{self_name}.{k[5:]}": v for k, v in cached.items()}


def _tested_self_attrs(steps: tuple[object, ...]) -> set[str]:
    out: set[str] = set()
    for step in steps:
        if isinstance(step, BranchStep):
            out.update(g.name[5:] for g in step.guards if g.name.startswith("self."))
            out |= _tested_self_attrs(step.body) | _tested_self_attrs(step.orelse)
        else:
            for name in ("body", "orelse", "finalbody"):
                inner = getattr(step, name, None)
                if inner:
                    out |= _tested_self_attrs(inner)
            for handler in getattr(step, "handlers", ()):
                out |= _tested_self_attrs(handler)
    return out
