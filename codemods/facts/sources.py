"""Where each value a rank uses in a step comes from.

For every entry point of a project's runners (the worker's step with each runner it
drives, ``profile_run``, warm-up and dummy runs: :meth:`NonDriverValues.entries`) and
each role (driver, non-driver), the path that rank takes is followed as the step walk
follows it (``self``/``super()`` calls, the runner the worker holds; branches the
literal arguments rule out and branches of the other role are left out), with each
callee's parameters bound to what its caller passed. At every model call, sampler call
and cache operation on that path (:class:`~codemods.facts.values.Sink`), each
argument's :class:`Source` is read from the assignments of the functions on the path
(:class:`~codemods.facts.values.Binding`; both read on first use, see
:class:`~codemods.facts.values.ValueFacts`):

* ``received``: a key of a dict received by a broadcast (``metadata_dict.pop("k")``
  after ``metadata_dict = broadcast_tensor_dict(src=0)``), or a field of an input
  rebuilt from one (``make_model_input_from_broadcasted_tensor_dict``,
  ``from_broadcasted_tensor_dict``); the producer names the broadcast's function;
* ``local``: computed on this rank (a helper's result, an expression);
* ``constant``: a literal (the driver flag is ``True`` on the driver, ``False`` on the
  others);
* ``default``: a parameter's or a constructor keyword's default, left unpassed;
* ``argument``: what the entry point itself was given.

An object built on the path (``SamplingMetadata(..., perform_sampling=False)``) also
gives the source of each of its keywords, as the slot ``sampling_metadata.perform_sampling``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from codemods.facts.values import Binding, Sink, ValueFacts
from runnercheck.analysis.constants import Bindings
from runnercheck.analysis.hierarchy import MethodRef
from runnercheck.analysis.holds import NonDriverValues
from runnercheck.analysis.model import ClassFacts, FunctionFacts, Role
from runnercheck.analysis.stepwalk import ROLES, reachable_calls
from runnercheck.analysis.syntax import last_name

if TYPE_CHECKING:
    from runnercheck.analysis.project import Project

#: How far values are followed through assignments and returns.
_DEPTH = 12
#: What a rank that lacks the data holds: the driver's value replacing it is the point
#: of preparing locally, not a change of behaviour.
NO_DATA = frozenset({"None", "0", "{}", "[]", "()", "set()"})


@dataclass(frozen=True)
class Source:
    """Where a value comes from (see the module docstring)."""

    kind: str
    #: ``received``: the key (``"*"``: the whole dict or input); ``constant`` and
    #: ``default``: the value; ``local``: what computes it; ``argument``: its name.
    detail: str
    #: ``received``: where the dict was received; ``local``: the function.
    producer: str = ""
    #: A constructor call: the class, and the source of each keyword it gives or
    #: leaves to a default its ``__init__`` shows.
    built: str = ""
    kwargs: tuple[tuple[str, Source], ...] = ()

    @property
    def fixed(self) -> bool:
        """A constant or a default: the same on every step whatever the data."""
        return self.kind in ("constant", "default")

    def describe(self) -> str:
        if self.kind == "received":
            what = "the whole dict" if self.detail == "*" else f"key {self.detail!r}"
            by = "" if ", received by " in self.producer else "received by "
            return f"{what} {'of ' if not by else ''}{by}{self.producer}"
        if self.kind == "local":
            return f"a local value ({self.detail})"
        if self.kind == "constant":
            return f"the constant {self.detail}"
        if self.kind == "default":
            return f"the default {self.detail}"
        return f"the argument {self.detail}"


@dataclass(frozen=True)
class Reach:
    """A value that reaches a sink at an entry point on one role."""

    entry: str
    role: Role
    #: ``"model"``, ``"sampler"`` or ``"cache"`` and the callee (``"cache
    #: self.cache_engine.swap_in"``).
    sink: str
    slot: str
    source: Source


@dataclass
class _Walk:
    """One entry point on one role being walked: the sinks found so far (``out``) and
    the functions already visited."""

    entry: str
    role: Role
    #: the other role (its branches and calls are not on this path)
    other: str
    #: the runner the worker of the entry drives
    runner: ClassFacts | None
    bindings: Bindings = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    out: list[Reach] = field(default_factory=list)


@dataclass
class _Frame:
    #: ``self`` is an instance of ``cls``; ``owner`` defines the function.
    cls: ClassFacts
    owner: ClassFacts
    func: FunctionFacts
    #: Parameter -> what the caller passed.
    env: dict[str, Source]


class ValueSources:
    """The sources of the values every rank uses at every entry point (``values``: the
    values of the project's methods, read from the same version of the files)."""

    def __init__(self, project: Project, values: ValueFacts) -> None:
        self.p = project
        self.values = values
        self.contract = project.contract
        #: The runner the worker of the entry being walked drives.
        self.runner: ClassFacts | None = None

    def reaches(self) -> list[Reach]:
        out: list[Reach] = []
        for entry, (cls, ref, runner) in NonDriverValues(self.p).entries().items():
            for role in ROLES:
                out += self._walk(entry, role, cls, ref, runner)
        return out

    # ------------------------------------------------------------------ walk
    def _walk(
        self, entry: str, role: Role, cls: ClassFacts, ref: MethodRef, runner: ClassFacts | None
    ) -> list[Reach]:
        self.runner = runner
        walk = _Walk(entry, role, "non-driver" if role == "driver" else "driver", runner)
        walk.bindings = self.p.constants.self_bindings(cls)
        given = {n: Source("argument", n) for n in (*ref.func.params, *ref.func.param_types)}
        self._visit(walk, cls, ref, given)
        return walk.out

    def _visit(
        self, walk: _Walk, owner_cls: ClassFacts, current: MethodRef, env: dict[str, Source]
    ) -> None:
        """The sinks of ``current`` (``self`` an instance of ``owner_cls``, its parameters
        bound to ``env``) and of the functions it calls on the walk's path."""
        p, role, other, seen, out = self.p, walk.role, walk.other, walk.seen, walk.out
        func = current.func
        if id(func) in seen or len(seen) > 200:
            return
        seen.add(id(func))
        frame = _Frame(owner_cls, current.owner, func, env)
        for sink in self.values.of(func).sinks:
            if sink.role == other or (role != "driver" and self._driver_only(sink)):
                continue
            label = f"{sink.kind} {sink.callee}"
            for slot, text in sink.slots:
                source = self._resolve(text, frame, role, sink.line, 0)
                out.append(Reach(walk.entry, role, label, slot, source))
                for keyword, inner in source.kwargs:
                    out.append(Reach(walk.entry, role, label, f"{slot}.{keyword}", inner))
        roles = {(c.line, c.col): c.role for c in func.calls}
        for step, side in reachable_calls(func.steps, walk.bindings):
            step_role = side or roles.get((step.line, step.col))
            if step_role == other or step.collective is not None:
                continue
            dispatched = p.steps._dispatch(owner_cls, current.owner, func, step.callee, walk.runner)
            if dispatched is None:
                continue
            target_cls, target = dispatched
            passed = self._passed(frame, step.args, step.kwargs, target.func, role, step.line)
            self._visit(walk, target_cls, target, passed)

    def _driver_only(self, sink: Sink) -> bool:
        return self.p.steps._driver_condition(sink.conditions)

    def _passed(
        self,
        frame: _Frame,
        args: tuple[str, ...],
        kwargs: tuple[tuple[str, str], ...],
        callee: FunctionFacts,
        role: Role,
        line: int,
        depth: int = 0,
    ) -> dict[str, Source]:
        """The callee's parameters bound to the caller's arguments (``depth``: how many
        bindings deep the call is being followed, bounded as in :meth:`_resolve`)."""
        params = [n for n in callee.params if n not in ("self", "cls")]
        env: dict[str, Source] = {}
        for name, text in zip(params, args, strict=False):
            env[name] = self._resolve(text, frame, role, line, depth)
        for name, text in kwargs:
            env[name] = self._resolve(text, frame, role, line, depth)
        return env

    # --------------------------------------------------------------- resolve
    def _resolve(self, text: str, frame: _Frame, role: Role, line: int, depth: int) -> Source:
        func = frame.func
        if not text or depth > _DEPTH:
            return Source("local", f"computed in {func.qualname}", func.qualname)
        flag = f"self.{self.contract.driver_flag}"
        holds_flag = role == "driver"
        if text == flag:
            return Source("constant", str(holds_flag))
        if text == f"not {flag}":
            return Source("constant", str(not holds_flag))
        if text.startswith("("):  # arithmetic (a call's argument as the step records it)
            return Source("local", f"computed in {func.qualname}", func.qualname)
        if not (text[0].isidentifier() or text.startswith("not ")):
            return Source("constant", text)
        if text in ("True", "False", "None"):
            return Source("constant", text)
        head, *attrs = text.removeprefix("not ").split(".")
        if head in ("self", "cls"):
            return Source("local", text, func.qualname)
        source = self._name(head, frame, role, line, depth)
        for attr in attrs:
            source = self._attr(source, attr)
        return source

    def _name(self, name: str, frame: _Frame, role: Role, line: int, depth: int) -> Source:
        func = frame.func
        found = self._binding(self.values.of(func).bindings.get(name, ()), role, line)
        if found is None:
            if name in frame.env:
                return frame.env[name]
            if name in func.param_defaults and name in func.params:
                return Source("default", func.param_defaults[name])
            if name in func.params or name in func.param_types:
                return Source("argument", name)
            return Source("local", name, func.qualname)
        return self._bound(found, frame, role, depth)

    @staticmethod
    def _binding(found: tuple[Binding, ...], role: Role, line: int) -> Binding | None:
        """The assignment of the rank's path that holds at ``line``: the last one above
        it (or the last one at all, for a value used in a loop's next round)."""
        mine = [b for b in found if b.role in (None, role)]
        above = [b for b in mine if b.line <= line]
        chosen = above or mine
        return chosen[-1] if chosen else None

    def _bound(self, binding: Binding, frame: _Frame, role: Role, depth: int) -> Source:
        func = frame.func
        if binding.kind == "value":
            return self._resolve(binding.text, frame, role, binding.line, depth + 1)
        if binding.kind == "key":
            base = self._resolve(binding.text, frame, role, binding.line, depth + 1)
            return self._key(base, binding.key, func)
        if binding.kind != "call":
            return Source("local", f"computed in {func.qualname}", func.qualname)
        callee = binding.text
        name = last_name(callee)
        contract = self.contract
        if name == contract.broadcast_function:
            return Source("received", "*", f"{callee} in {func.qualname}")
        if name == contract.from_dict_method and binding.args:
            rebuilt = self._rebuilt(binding, frame, role, depth)
            if rebuilt is not None:
                return rebuilt
        returned = self._returned(binding, frame, role, depth)
        if returned is not None:
            return returned
        if name in (contract.make_input_method, contract.from_dict_method) and binding.args:
            base = self._resolve(binding.args[0], frame, role, binding.line, depth + 1)
            if base.kind == "received":
                return base
        if name[:1].isupper() and binding.index is None:
            given = {
                keyword: self._resolve(text, frame, role, binding.line, depth + 1)
                for keyword, text in binding.kwargs
            }
            positional = [] if any(a.startswith("*") for a in binding.args) else binding.args
            for keyword, text in zip(self._positional_fields(name, func), positional, strict=False):
                given.setdefault(keyword, self._resolve(text, frame, role, binding.line, depth + 1))
            for keyword, value in self._init_defaults(name, func).items():
                given.setdefault(keyword, Source("default", value))
            return Source(
                "local", f"{name}(...)", func.qualname, built=name, kwargs=tuple(given.items())
            )
        suffix = f"[{binding.index}]" if binding.index is not None else ""
        return Source("local", f"{callee}(...){suffix}", func.qualname)

    def _returned(self, binding: Binding, frame: _Frame, role: Role, depth: int) -> Source | None:
        """What a method the binding calls on ``self``, ``super()`` or the runner the
        worker holds returns on this rank's path (not followed deeper than
        :meth:`_resolve` goes: a method may return its own call)."""
        if depth > _DEPTH:
            return None
        dispatched = self.p.steps._dispatch(
            frame.cls, frame.owner, frame.func, binding.text, self.runner
        )
        if dispatched is None or dispatched[1].func.is_stub:
            return None
        target_cls, ref = dispatched
        callee = ref.func
        name = "<return>" if binding.index is None else f"<return>#{binding.index}"
        returned = self.values.of(callee).bindings.get(name)
        if returned is None:
            return None
        passed = self._passed(
            frame, binding.args, binding.kwargs, callee, role, binding.line, depth + 1
        )
        inner = _Frame(target_cls, ref.owner, callee, passed)
        found = self._binding(returned, role, callee.end_line)
        if found is None:
            return None
        return self._bound(found, inner, role, depth + 1)

    def _rebuilt(self, binding: Binding, frame: _Frame, role: Role, depth: int) -> Source | None:
        """``Cls.from_broadcasted_tensor_dict(d)`` on a received ``d``: the input ``Cls``
        produced (its ``as_broadcastable_tensor_dict``), received with ``d``."""
        head, _, _name = binding.text.rpartition(".")
        cls = self.p.resolve_class(head, frame.func.path) if head not in ("cls", "") else None
        if head == "cls":
            cls = frame.cls
        base = self._resolve(binding.args[0], frame, role, binding.line, depth + 1)
        if cls is None or base.kind != "received":
            return None
        producer = f"{cls.name}.{self.contract.as_dict_method}, received by {base.producer}"
        return Source("received", "*", producer)

    def _key(self, base: Source, key: str, func: FunctionFacts) -> Source:
        if base.kind == "received" and base.detail == "*":
            return Source("received", key, base.producer)
        if base.kind in ("received", "local"):
            return base
        return Source("local", f"{key!r} of {base.describe()}", func.qualname)

    @staticmethod
    def _attr(base: Source, attr: str) -> Source:
        if base.kind == "received":
            return Source("received", attr, base.producer) if base.detail == "*" else base
        given = dict(base.kwargs)
        if attr in given:
            return given[attr]
        if base.built:
            return Source("default", f"of {base.built}.{attr}")
        return base

    def _positional_fields(self, name: str, func: FunctionFacts) -> list[str]:
        """The fields a NamedTuple's positional arguments fill, in order."""
        cls = self.p.resolve_class(name, func.path)
        if cls is None or not any(b.endswith("NamedTuple") for b in cls.bases):
            return []
        return list(cls.annotation_texts)

    def _init_defaults(self, name: str, func: FunctionFacts) -> dict[str, str]:
        return constructor_defaults(self.p, name, func.path)


def constructor_defaults(project: Project, name: str, from_path: str) -> dict[str, str]:
    """The literal keyword defaults of the class ``name`` as seen from ``from_path``:
    its ``__init__``'s, or its dataclass fields' (those of its bases that are read
    included), where the class is read; else none."""
    cls = project.resolve_class(name, from_path)
    if cls is None:
        return {}
    init = project.resolve_method(cls, "__init__")
    if init is not None:
        return dict(init.func.param_defaults)
    out: dict[str, str] = {}
    for klass in reversed(project.mro(cls)):  # a subclass's field wins over its base's
        if klass.is_dataclass:
            out.update({f.name: f.default for f in klass.fields if f.default is not None})
    return out


def changed_sources(old: list[Reach], new: list[Reach]) -> list[tuple[Reach, Reach]]:
    """Values whose source a rewrite changes in kind at the same entry point, role,
    sink and slot: a constant or default that becomes another value or stops being
    fixed, or a received or local value that becomes a constant or default. A value
    received before and computed locally after (or the reverse) is the same data
    prepared on another rank; a ``None``, zero or empty value before is what a rank
    without the data held."""
    after: dict[tuple[str, str, str, str], Reach] = {}
    for reach in new:
        after.setdefault((reach.entry, reach.role, reach.sink, reach.slot), reach)
    out: list[tuple[Reach, Reach]] = []
    for reach in old:
        other = after.get((reach.entry, reach.role, reach.sink, reach.slot))
        parent = after.get((reach.entry, reach.role, reach.sink, reach.slot.rpartition(".")[0]))
        if other is None and parent is not None and parent.source.built:
            keyword = reach.slot.rpartition(".")[2]
            unknown = Source("default", f"of {parent.source.built}.{keyword}")
            other = Reach(reach.entry, reach.role, reach.sink, reach.slot, unknown)
        if other is None:
            continue
        a, b = reach.source, other.source
        if a.fixed:
            if a.detail in NO_DATA and not b.fixed:
                continue
            changed = not b.fixed or a.detail != b.detail
        else:
            changed = b.fixed
        if changed and (reach, other) not in out:
            out.append((reach, other))
    return out


@dataclass(frozen=True)
class SourceChange:
    """A value whose source a rewrite changes (see :func:`changed_sources`)."""

    before: Reach
    after: Reach

    def describe(self) -> str:
        b = self.before
        return (
            f"at {b.entry}, a {b.role} rank passed {b.slot} to the {b.sink} from "
            f"{b.source.describe()} before the rewrite and from "
            f"{self.after.source.describe()} after it"
        )
