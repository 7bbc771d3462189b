"""The facts of many files joined into one project: classes across files, the MRO,
workers and their runners, keys produced and accepted, broadcasts per step.

Build it with ``Project(modules, contract)`` from :class:`~runnercheck.check.facts.ModuleFacts`
(see :func:`runnercheck.check.facts.extract_source`). Everything is computed lazily and
memoised; nothing reads files or imports code.

The API (stable)
----------------
``Project.resolve_class(name, from_path)`` -> ClassFacts | None
``Project.mro(cls)`` -> list[ClassFacts] (the class first; C3, classes outside the tree left out)
``Project.ancestor_names(cls)`` -> set of every base name reachable (found in the tree or not)
``Project.resolve_method(cls, name, after=None)`` -> :class:`MethodRef` | None
``Project.resolve_function(callee, from_path)`` -> FunctionFacts | None (module-level helpers)
``Project.is_worker(cls)`` / ``is_runner(cls)`` / ``is_abstract(cls)``
``Project.workers()`` / ``runners()`` -> list[ClassFacts]
``Project.runner_candidates(worker)`` -> dict attr -> list[ClassFacts] (``self.model_runner = ...``)
``Project.worker_runner_pairs()`` -> list[(worker ClassFacts, runner ClassFacts)]
``Project.dataclass_fields(cls)`` -> dict name -> (ClassFacts, FieldFacts) | None when a base is unknown
``Project.produced(cls)`` -> :class:`Produced` | None (keys of ``as_broadcastable_tensor_dict``)
``Project.receivers(cls)`` -> list[:class:`Receiver`] (``cls(**tensor_dict)`` in ``from_broadcasted_tensor_dict``)
``Project.broadcasts_per_step(cls, runner=None)`` -> dict role -> :class:`PathCount`
``Project.collectives_reachable(cls, method_name)`` -> list[:class:`Reached`]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePath

from runnercheck.check.facts import (
    BranchStep,
    CallStep,
    ClassFacts,
    DictFacts,
    ExitStep,
    FieldFacts,
    FunctionFacts,
    KeyFacts,
    LoopStep,
    ModuleFacts,
    Role,
    RoleAssertStep,
    Step,
    TryStep,
    last_name,
)
from runnercheck.contract import VLLM, Contract

#: Base names that contribute no dataclass fields and no contract methods.
_NEUTRAL_BASES = frozenset(
    {"object", "ABC", "ABCMeta", "Generic", "Protocol", "NamedTuple", "Enum", "Any"}
)
ROLES: tuple[Role, ...] = ("driver", "non-driver")


@dataclass(frozen=True)
class MethodRef:
    """A method found by MRO lookup: the class that defines it and its facts."""

    owner: ClassFacts
    func: FunctionFacts


@dataclass
class Produced:
    """What ``as_broadcastable_tensor_dict`` of a class puts in its dict."""

    method: MethodRef
    keys: dict[str, KeyFacts] = field(default_factory=dict)
    #: ``self`` fields whose values flow into the dict (as keys or through helpers).
    fields: set[str] = field(default_factory=set)
    dynamic: bool = False
    all_fields: bool = False
    calls_super: bool = False
    #: Callees whose dicts flow in but could not be followed.
    unknown_sources: list[str] = field(default_factory=list)


@dataclass
class Receiver:
    """``target(**tensor_dict)`` inside ``from_broadcasted_tensor_dict``."""

    method: MethodRef
    target: ClassFacts | None
    target_name: str
    line: int
    col: int
    #: Literal keys popped (directly or by helpers) before the constructor call.
    popped: set[str] = field(default_factory=set)
    dynamic_pop: bool = False


@dataclass(frozen=True)
class BroadcastSite:
    path: str
    line: int
    col: int
    #: The function that holds the call (``"ModelRunner.prepare_input_tensors"``).
    where: str
    callee: str


@dataclass(frozen=True)
class PathCount:
    """The most step broadcasts on one path, and where they are."""

    count: int
    sites: tuple[BroadcastSite, ...] = ()

    def __add__(self, other: PathCount) -> PathCount:
        return PathCount(self.count + other.count, self.sites + other.sites)


ZERO = PathCount(0)


def _best(a: PathCount | None, b: PathCount | None) -> PathCount | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if b.count > a.count else a


@dataclass(frozen=True)
class Reached:
    """A collective reached from a method, with the chain of methods that leads there."""

    site: BroadcastSite
    chain: tuple[str, ...]


def module_parts(path: str) -> tuple[str, ...]:
    parts = list(PurePath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return tuple(parts)


class Project:
    def __init__(self, modules: Iterable[ModuleFacts], contract: Contract = VLLM) -> None:
        self.contract = contract
        self.modules: dict[str, ModuleFacts] = {m.path: m for m in modules}
        self._by_name: dict[str, list[ClassFacts]] = {}
        self._functions_by_name: dict[str, list[FunctionFacts]] = {}
        self._by_suffix: dict[tuple[str, ...], list[ModuleFacts]] = {}
        self._class_module: dict[int, ModuleFacts] = {}
        for module in self.modules.values():
            for cls in module.classes.values():
                self._by_name.setdefault(cls.name, []).append(cls)
                self._class_module[id(cls)] = module
            for func in module.functions.values():
                self._functions_by_name.setdefault(func.name, []).append(func)
            parts = module_parts(module.path)
            for i in range(len(parts)):
                self._by_suffix.setdefault(parts[i:], []).append(module)
        self._mro: dict[int, list[ClassFacts]] = {}
        self._ancestors: dict[int, set[str]] = {}
        self._produced: dict[int, Produced | None] = {}
        #: Paths whose findings are reported (None: all); a rule that may place a
        #: finding in several files prefers one of these.
        self.reportable: set[str] | None = None
        self._paired: list[ClassFacts] | None = None
        self._count_memo: dict[tuple[int, int, str, Role, int], PathCount | None] = {}

    # ------------------------------------------------------------ classes
    def module_of(self, cls: ClassFacts) -> ModuleFacts:
        return self._class_module[id(cls)]

    def all_classes(self) -> list[ClassFacts]:
        return [c for m in self.modules.values() for c in m.classes.values()]

    def _module_for(self, dotted_module: str, from_path: str) -> list[ModuleFacts]:
        level = len(dotted_module) - len(dotted_module.lstrip("."))
        name = dotted_module.lstrip(".")
        parts = tuple(p for p in name.split(".") if p)
        if level:
            base = module_parts(from_path)[:-1]
            if level > 1:
                base = base[: len(base) - (level - 1)]
            parts = base + parts
        return self._by_suffix.get(parts, []) if parts else []

    def resolve_class(self, name: str, from_path: str) -> ClassFacts | None:
        """The class a (possibly dotted) name refers to in the file ``from_path``."""
        simple = last_name(name)
        module = self.modules.get(from_path)
        if module is not None:
            if "." not in name and simple in module.classes:
                return module.classes[simple]
            head = name.split(".", 1)[0]
            origin = module.imports.get(head)
            if origin is not None:
                full = origin + name[len(head) :]
                mod_name, _, cls_name = full.rpartition(".")
                for candidate in self._module_for(mod_name, from_path):
                    if cls_name in candidate.classes:
                        return candidate.classes[cls_name]
        found = self._by_name.get(simple, [])
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        here = str(PurePath(from_path).parent)
        for cls in found:
            if str(PurePath(cls.path).parent) == here:
                return cls
        return sorted(found, key=lambda c: (c.path, c.line))[0]

    def direct_bases(self, cls: ClassFacts) -> list[ClassFacts | str]:
        out: list[ClassFacts | str] = []
        for base in cls.bases:
            if last_name(base) in _NEUTRAL_BASES:
                continue
            resolved = self.resolve_class(base, cls.path)
            out.append(
                resolved if resolved is not None and resolved is not cls else last_name(base)
            )
        return out

    def mro(self, cls: ClassFacts) -> list[ClassFacts]:
        cached = self._mro.get(id(cls))
        if cached is not None:
            return cached
        self._mro[id(cls)] = [cls]  # guards cycles
        seqs: list[list[ClassFacts]] = []
        bases = [b for b in self.direct_bases(cls) if isinstance(b, ClassFacts)]
        for base in bases:
            seqs.append(list(self.mro(base)))
        seqs.append(list(bases))
        result = [cls]
        while True:
            seqs = [s for s in seqs if s]
            if not seqs:
                break
            head = None
            for seq in seqs:
                candidate = seq[0]
                if not any(candidate in s[1:] for s in seqs):
                    head = candidate
                    break
            if head is None:  # inconsistent: fall back to depth-first order
                for seq in seqs:
                    for item in seq:
                        if item not in result:
                            result.append(item)
                break
            result.append(head)
            for seq in seqs:
                if seq and seq[0] is head:
                    seq.pop(0)
        self._mro[id(cls)] = result
        return result

    def ancestor_names(self, cls: ClassFacts) -> set[str]:
        """Names of every base reachable from ``cls`` (in the tree or not), not ``cls``."""
        cached = self._ancestors.get(id(cls))
        if cached is not None:
            return cached
        names: set[str] = set()
        self._ancestors[id(cls)] = names
        for base in self.direct_bases(cls):
            if isinstance(base, str):
                names.add(base)
            else:
                names.add(base.name)
                names |= self.ancestor_names(base)
        return names

    def unresolved_bases(self, cls: ClassFacts) -> set[str]:
        out: set[str] = set()
        for klass in self.mro(cls):
            out.update(b for b in self.direct_bases(klass) if isinstance(b, str))
        return out

    def inherits(self, cls: ClassFacts, names: Iterable[str]) -> bool:
        wanted = set(names)
        return bool(wanted & self.ancestor_names(cls))

    # ------------------------------------------------------------ methods
    def resolve_method(
        self, cls: ClassFacts, name: str, after: ClassFacts | None = None
    ) -> MethodRef | None:
        """``name`` looked up along the MRO of ``cls`` (after ``after`` for ``super()``)."""
        mro = self.mro(cls)
        start = 0
        if after is not None:
            for i, klass in enumerate(mro):
                if klass is after:
                    start = i + 1
                    break
        for klass in mro[start:]:
            func = klass.methods.get(name)
            if func is not None:
                return MethodRef(klass, func)
        return None

    def defines(self, cls: ClassFacts, name: str) -> ClassFacts | None:
        """The first class along the MRO that defines ``name`` (method or class attribute)."""
        for klass in self.mro(cls):
            if name in klass.methods or name in klass.class_attrs:
                return klass
        return None

    def resolve_function(self, callee: str, from_path: str) -> FunctionFacts | None:
        """A module-level function named by ``callee`` as called in ``from_path``."""
        simple = last_name(callee)
        module = self.modules.get(from_path)
        if module is not None:
            if "." not in callee and simple in module.functions:
                return module.functions[simple]
            head = callee.split(".", 1)[0]
            origin = module.imports.get(head)
            if origin is not None:
                full = origin + callee[len(head) :]
                mod_name, _, func_name = full.rpartition(".")
                for candidate in self._module_for(mod_name, from_path):
                    if func_name in candidate.functions:
                        return candidate.functions[func_name]
        found = self._functions_by_name.get(simple, [])
        return found[0] if len(found) == 1 else None

    # -------------------------------------------------------------- roles
    def _contract_base_names(self) -> set[str]:
        c = self.contract
        return {*c.runner_bases, *c.worker_bases, *c.input_bases}

    def is_abstract(self, cls: ClassFacts) -> bool:
        """Declared abstract, a contract base, or named like a base/mixin."""
        name = cls.name
        if name in self._contract_base_names():
            return True
        if cls.abstract_methods:
            return True
        if any(last_name(b) in ("ABC", "Protocol") for b in cls.bases):
            return True
        return name.endswith(("Base", "Mixin", "Interface")) or name.startswith(
            ("Abstract", "Base")
        )

    def is_worker(self, cls: ClassFacts) -> bool:
        if self.inherits(cls, self.contract.worker_bases):
            return True
        return cls.name.endswith("Worker") and (
            self.resolve_method(cls, self.contract.execute_method) is not None
        )

    def is_runner(self, cls: ClassFacts) -> bool:
        if self.inherits(cls, self.contract.runner_bases):
            return True
        if cls.name in self.contract.runner_bases:
            return True
        return "Runner" in cls.name and (
            self.resolve_method(cls, self.contract.execute_method) is not None
        )

    def workers(self) -> list[ClassFacts]:
        return [c for c in self.all_classes() if self.is_worker(c)]

    def runners(self) -> list[ClassFacts]:
        return [c for c in self.all_classes() if self.is_runner(c)]

    def runner_candidates(self, worker: ClassFacts) -> dict[str, list[ClassFacts]]:
        """Runner classes each ``self.<attr>`` of a worker may hold."""
        out: dict[str, list[ClassFacts]] = {}
        for klass in reversed(self.mro(worker)):
            for attr, names in klass.self_attrs.items():
                found: list[ClassFacts] = []
                for name in names:
                    target = self.resolve_class(name, klass.path)
                    if target is not None and self.is_runner(target) and target not in found:
                        found.append(target)
                if found:
                    out[attr] = found
        return out

    def paired_runners(self) -> list[ClassFacts]:
        """Runners that some worker holds."""
        if self._paired is None:
            self._paired = []
            for _, runner in self.worker_runner_pairs():
                if runner not in self._paired:
                    self._paired.append(runner)
        return self._paired

    def worker_runner_pairs(self) -> list[tuple[ClassFacts, ClassFacts]]:
        pairs: list[tuple[ClassFacts, ClassFacts]] = []
        for worker in self.workers():
            for runners in self.runner_candidates(worker).values():
                for runner in runners:
                    if (worker, runner) not in pairs:
                        pairs.append((worker, runner))
        return pairs

    # ------------------------------------------------------------- fields
    def dataclass_fields(self, cls: ClassFacts) -> dict[str, tuple[ClassFacts, FieldFacts]] | None:
        """All dataclass fields of ``cls`` (inherited too), or None when some base
        outside the tree might add fields."""
        neutral = {*_NEUTRAL_BASES, *self.contract.input_bases}
        if any(name not in neutral for name in self.unresolved_bases(cls)):
            return None
        fields: dict[str, tuple[ClassFacts, FieldFacts]] = {}
        for klass in reversed(self.mro(cls)):
            if klass.is_dataclass:
                for fld in klass.fields:
                    fields[fld.name] = (klass, fld)
        return fields

    def is_driver_only(self, cls: ClassFacts, fld: FieldFacts) -> bool:
        """Declared driver-only: marker metadata (inline or a constant) or the config list."""
        if fld.driver_only:
            return True
        if fld.metadata_ref is not None and self._is_marker_constant(fld.metadata_ref, cls):
            return True
        return any(self.contract.is_driver_only(k.name, fld.name) for k in self.mro(cls))

    def _is_marker_constant(self, ref: str, cls: ClassFacts) -> bool:
        owner = next(
            (k for k in self.mro(cls) if any(f.metadata_ref == ref for f in k.fields)), cls
        )
        module = self.module_of(owner)
        if "." not in ref and ref in module.driver_only_constants:
            return True
        head = ref.split(".", 1)[0]
        origin = module.imports.get(head)
        if origin is None:
            return False
        full = origin + ref[len(head) :]
        mod_name, _, name = full.rpartition(".")
        return any(name in m.driver_only_constants for m in self._module_for(mod_name, module.path))

    # -------------------------------------------------------- keys produced
    def produced(self, cls: ClassFacts) -> Produced | None:
        """Keys ``cls.as_broadcastable_tensor_dict()`` produces, or None when it has none."""
        if id(cls) in self._produced:
            return self._produced[id(cls)]
        self._produced[id(cls)] = None  # guards recursion
        ref = self.resolve_method(cls, self.contract.as_dict_method)
        result = None
        if ref is not None and not ref.func.is_stub and not ref.func.is_abstract:
            result = self.produced_by(cls, ref)
        self._produced[id(cls)] = result
        return result

    def produced_by(self, cls: ClassFacts, ref: MethodRef) -> Produced:
        """Keys produced by one definition of the method, with ``self`` an instance of ``cls``."""
        out = Produced(method=ref)
        self._collect_function(cls, ref, out, depth=0)
        return out

    def _collect_function(self, cls: ClassFacts, ref: MethodRef, out: Produced, depth: int) -> None:
        func = ref.func
        if not func.returns:
            out.dynamic = True
        seen: set[str] = set()
        for name in func.returns:
            facts = func.dicts.get(name)
            if facts is not None:
                self._collect_dict(cls, ref, facts, out, seen, depth)

    def _collect_dict(
        self,
        cls: ClassFacts,
        ref: MethodRef,
        facts: DictFacts,
        out: Produced,
        seen: set[str],
        depth: int,
    ) -> None:
        if facts.name in seen or depth > 8:
            return
        seen.add(facts.name)
        func = ref.func
        for key, kf in facts.keys.items():
            out.keys.setdefault(key, kf)
            out.fields.update(kf.fields)
        out.fields.update(facts.dynamic_fields)
        out.dynamic |= facts.dynamic
        out.all_fields |= facts.all_fields
        for name in facts.merges:
            other = func.dicts.get(name)
            if other is not None:
                self._collect_dict(cls, ref, other, out, seen, depth)
            else:
                out.dynamic = True
        as_dict = self.contract.as_dict_method
        for callee in facts.sources:
            name = last_name(callee)
            head = callee[: -len(name) - 1] if "." in callee else ""
            if head == "super()" or (
                name == as_dict and head and self.resolve_class(head, cls.path) in self.mro(cls)
            ):
                out.calls_super = True
                parent = self.resolve_method(cls, name, after=ref.owner)
                if parent is not None and not parent.func.is_stub:
                    self._collect_function(cls, parent, out, depth + 1)
                continue
            if head in ("self", "cls") or (func.params and head == func.params[0]):
                target = self.resolve_method(cls, name)
                if target is not None and target.func is not func:
                    self._collect_function(cls, target, out, depth + 1)
                    continue
            helper = self.resolve_function(callee, func.path) if not head else None
            if helper is not None:
                self._collect_function(cls, MethodRef(ref.owner, helper), out, depth + 1)
                continue
            out.dynamic = True
            out.unknown_sources.append(callee)
        for call in facts.helpers:
            if last_name(call.callee) == self.contract.broadcast_function:
                continue
            target_func, offset = self._helper(cls, ref, call.callee)
            if target_func is None:
                out.dynamic = True
                for flds in call.arg_fields:
                    out.fields.update(flds)
                continue
            index = call.arg_index + offset
            param = next((d for d in target_func.dicts.values() if d.param_index == index), None)
            if param is None:
                continue
            before = set(out.keys)
            self._collect_dict(cls, MethodRef(ref.owner, target_func), param, out, set(), depth + 1)
            flows = set(param.flow_params)
            for kf in param.keys.values():
                flows.update(kf.params)
            for p in flows:
                arg = p - offset
                if 0 <= arg < len(call.arg_fields):
                    out.fields.update(call.arg_fields[arg])
            del before

    def _helper(
        self, cls: ClassFacts, ref: MethodRef, callee: str
    ) -> tuple[FunctionFacts | None, int]:
        """A function a dict is passed to, and the offset of its positional parameters."""
        name = last_name(callee)
        head = callee[: -len(name) - 1] if "." in callee else ""
        if head in ("self", "cls") or (ref.func.params and head == ref.func.params[0]):
            target = self.resolve_method(cls, name)
            if target is None:
                return None, 0
            return target.func, 0 if target.func.is_staticmethod else 1
        if head:
            klass = self.resolve_class(head, ref.func.path)
            if klass is not None:
                target = self.resolve_method(klass, name)
                if target is not None:
                    return target.func, 1 if target.func.is_classmethod else 0
            return None, 0
        return self.resolve_function(callee, ref.func.path), 0

    # -------------------------------------------------------- receivers
    def receivers(self, cls: ClassFacts) -> list[Receiver]:
        """``target(**tensor_dict)`` calls in the ``from_broadcasted_tensor_dict`` of ``cls``."""
        ref = self.resolve_method(cls, self.contract.from_dict_method)
        if ref is None or ref.func.is_stub or len(ref.func.params) < 2:
            return []
        func = ref.func
        offset = 1 if func.is_classmethod or not func.is_staticmethod else 0
        dict_param = func.params[offset] if len(func.params) > offset else None
        facts = func.dicts.get(dict_param or "")
        if facts is None:
            return []
        out: list[Receiver] = []
        for construct in facts.constructs:
            target_name = construct.target
            if target_name in ("cls", func.params[0]):
                target: ClassFacts | None = cls
            else:
                target = self.resolve_class(target_name, func.path)
            receiver = Receiver(
                method=ref,
                target=target,
                target_name=target_name,
                line=construct.line,
                col=construct.col,
            )
            receiver.popped = {k for k, line in facts.pops.items() if line <= construct.line}
            receiver.dynamic_pop = facts.dynamic_pop
            for call in facts.helpers:
                if call.line > construct.line:
                    continue
                helper, helper_offset = self._helper(cls, ref, call.callee)
                if helper is None:
                    receiver.dynamic_pop = True
                    continue
                index = call.arg_index + helper_offset
                param = next((d for d in helper.dicts.values() if d.param_index == index), None)
                if param is not None:
                    receiver.popped |= set(param.pops)
                    receiver.dynamic_pop |= param.dynamic_pop
            out.append(receiver)
        return out

    # ------------------------------------------------- broadcasts per step
    def _dispatch(
        self,
        cls: ClassFacts,
        owner: ClassFacts,
        func: FunctionFacts,
        callee: str,
        runner: ClassFacts | None,
    ) -> tuple[ClassFacts, MethodRef] | None:
        """The method a call in ``owner.func`` (self an instance of ``cls``) runs."""
        parts = callee.split(".")
        name = parts[-1]
        if parts[0] == "super()" and len(parts) == 2:
            ref = self.resolve_method(cls, name, after=owner)
            return (cls, ref) if ref is not None else None
        if parts[0] in ("self", "cls") and len(parts) == 2:
            ref = self.resolve_method(cls, name)
            return (cls, ref) if ref is not None else None
        if parts[0] == "self" and len(parts) == 3:
            candidates = self.runner_candidates(cls).get(parts[1], [])
            chosen: ClassFacts | None = None
            if runner is not None and runner in candidates:
                chosen = runner
            elif len(candidates) == 1:
                chosen = candidates[0]
            if chosen is None:
                return None
            ref = self.resolve_method(chosen, name)
            return (chosen, ref) if ref is not None else None
        return None

    def _count_function(
        self, cls: ClassFacts, ref: MethodRef, role: Role, runner: ClassFacts | None
    ) -> PathCount | None:
        """Most step broadcasts over the paths of one call (None: no path completes)."""
        key = (id(cls), id(ref.owner), ref.func.qualname, role, id(runner))
        if key in self._count_memo:
            return self._count_memo[key]
        self._count_memo[key] = ZERO  # a recursive call counts nothing
        result: PathCount | None
        if ref.func.is_stub:
            result = ZERO
        else:
            ft, exited = self._walk(ref.func.steps, cls, ref, role, runner, ZERO)
            result = _best(ft, exited)
        self._count_memo[key] = result
        return result

    def _walk(
        self,
        steps: tuple[Step, ...],
        cls: ClassFacts,
        ref: MethodRef,
        role: Role,
        runner: ClassFacts | None,
        start: PathCount | None,
    ) -> tuple[PathCount | None, PathCount | None]:
        """(best count falling through the block, best count of paths that returned)."""
        running = start
        exited: PathCount | None = None
        for step in steps:
            if running is None:
                break
            if isinstance(step, CallStep):
                if step.collective is not None:
                    if step.step_broadcast:
                        site = BroadcastSite(
                            ref.func.path, step.line, step.col, ref.func.qualname, step.callee
                        )
                        running = running + PathCount(1, (site,))
                    continue
                target = self._dispatch(cls, ref.owner, ref.func, step.callee, runner)
                if target is None:
                    continue
                sub = self._count_function(target[0], target[1], role, runner)
                running = None if sub is None else running + sub
            elif isinstance(step, BranchStep):
                then_ok = step.then_role is None or step.then_role == role
                else_ok = step.else_role is None or step.else_role == role
                ft_then = ex_then = ft_else = ex_else = None
                if then_ok:
                    ft_then, ex_then = self._walk(step.body, cls, ref, role, runner, running)
                if else_ok:
                    ft_else, ex_else = self._walk(step.orelse, cls, ref, role, runner, running)
                exited = _best(exited, _best(ex_then, ex_else))
                running = _best(ft_then, ft_else)
            elif isinstance(step, LoopStep):
                ft_body, ex_body = self._walk(step.body, cls, ref, role, runner, running)
                exited = _best(exited, ex_body)
                running = _best(running, ft_body)
                if step.orelse:
                    ft_else, ex_else = self._walk(step.orelse, cls, ref, role, runner, running)
                    exited = _best(exited, ex_else)
                    running = ft_else
            elif isinstance(step, TryStep):
                ft_body, ex_body = self._walk(step.body, cls, ref, role, runner, running)
                exited = _best(exited, ex_body)
                after = ft_body
                if step.orelse:
                    ft_else, ex_else = self._walk(step.orelse, cls, ref, role, runner, after)
                    exited = _best(exited, ex_else)
                    after = ft_else
                for handler in step.handlers:
                    ft_h, ex_h = self._walk(handler, cls, ref, role, runner, running)
                    exited = _best(exited, ex_h)
                    after = _best(after, ft_h)
                if step.finalbody:
                    ft_f, ex_f = self._walk(step.finalbody, cls, ref, role, runner, after)
                    exited = _best(exited, ex_f)
                    after = ft_f
                running = after
            elif isinstance(step, ExitStep):
                if step.kind == "return":
                    exited = _best(exited, running)
                running = None
            elif isinstance(step, RoleAssertStep):
                if step.role != role:
                    running = None
        return running, exited

    def broadcasts_per_step(
        self, cls: ClassFacts, runner: ClassFacts | None = None, entry: str | None = None
    ) -> dict[Role, PathCount]:
        """The most step-metadata broadcasts one ``execute_model`` call of ``cls`` runs on
        each role's path, following ``self.*``/``super()`` calls and, for a worker, the
        calls into ``runner`` (``self.model_runner.*``)."""
        name = entry or self.contract.execute_method
        ref = self.resolve_method(cls, name)
        out: dict[Role, PathCount] = {}
        for role in ROLES:
            if ref is None:
                out[role] = ZERO
                continue
            result = self._count_function(cls, ref, role, runner)
            out[role] = result if result is not None else ZERO
        return out

    # ------------------------------------------------------- collectives
    def collectives_reachable(self, cls: ClassFacts, method: str) -> list[Reached]:
        """Every collective call reachable from ``cls.method`` through ``self``/``cls``/
        ``super()`` calls (any path, any role)."""
        ref = self.resolve_method(cls, method)
        if ref is None:
            return []
        found: list[Reached] = []
        seen: set[tuple[int, str]] = set()

        def visit(current: MethodRef, chain: tuple[str, ...]) -> None:
            key = (id(current.owner), current.func.name)
            if key in seen:
                return
            seen.add(key)
            for step in _flatten(current.func.steps):
                if step.collective is not None:
                    site = BroadcastSite(
                        current.func.path,
                        step.line,
                        step.col,
                        current.func.qualname,
                        step.callee,
                    )
                    found.append(Reached(site, chain))
                    continue
                parts = step.callee.split(".")
                if len(parts) != 2 or parts[0] not in ("self", "cls", "super()"):
                    continue
                target = self._dispatch(cls, current.owner, current.func, step.callee, None)
                if target is not None:
                    visit(target[1], (*chain, target[1].func.qualname))

        visit(ref, (ref.func.qualname,))
        return found


def _flatten(steps: tuple[Step, ...]) -> list[CallStep]:
    out: list[CallStep] = []
    for step in steps:
        if isinstance(step, CallStep):
            out.append(step)
        elif isinstance(step, BranchStep):
            out += _flatten(step.body) + _flatten(step.orelse)
        elif isinstance(step, LoopStep):
            out += _flatten(step.body) + _flatten(step.orelse)
        elif isinstance(step, TryStep):
            out += _flatten(step.body)
            for handler in step.handlers:
                out += _flatten(handler)
            out += _flatten(step.orelse) + _flatten(step.finalbody)
    return out
