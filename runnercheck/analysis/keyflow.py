"""Key flow: the keys a class's ``as_broadcastable_tensor_dict`` produces (following
``super()``, ``self`` helpers and module-level helpers), the ``target(**tensor_dict)``
receivers of ``from_broadcasted_tensor_dict`` with the keys popped before them, and the
keys it (and what it hands the dict to) reads with no default."""

from __future__ import annotations

from dataclasses import dataclass, field

from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.model import (
    ClassFacts,
    DictFacts,
    FunctionFacts,
    HelperCall,
    KeyFacts,
)
from runnercheck.analysis.syntax import last_name


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
    #: ``super()`` leads to a base outside the analysed files: keys may be missing.
    unknown_parent: bool = False
    #: Keys may be added that cannot be told: anything :attr:`dynamic` but a dump of
    #: another value's fields (:attr:`dumps`).
    open: bool = False
    #: Dumps of another value's fields (``attn_metadata.asdict_zerocopy``): they add
    #: that value's fields, which the receiver hands on whole (``make_metadata(**d)``).
    dumps: list[str] = field(default_factory=list)


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
class KeyRead:
    """A key the receiving side reads with no default (a KeyError when it is missing)."""

    key: str
    path: str
    line: int
    col: int
    #: The function that reads it (``from_broadcasted_tensor_dict`` or a helper).
    function: str


@dataclass
class Required:
    """What ``from_broadcasted_tensor_dict`` of a class (and what it hands the dict to)
    needs of the dict it receives."""

    method: MethodRef
    reads: dict[str, KeyRead] = field(default_factory=dict)
    #: Keys the receiving side puts into the dict itself before reading them.
    puts: set[str] = field(default_factory=set)
    #: The receiving side adds keys it cannot tell, or hands the dict to a call that
    #: cannot be followed.
    open: bool = False


class KeyFlow:
    """Keys produced and received by input classes (a part of a project)."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self.contract = hierarchy.contract
        self._produced: dict[int, Produced | None] = {}

    # -------------------------------------------------------- keys produced
    def produced(self, cls: ClassFacts) -> Produced | None:
        """Keys ``cls.as_broadcastable_tensor_dict()`` produces, or None when it has none."""
        if id(cls) in self._produced:
            return self._produced[id(cls)]
        self._produced[id(cls)] = None  # guards recursion
        ref = self.hierarchy.resolve_method(cls, self.contract.as_dict_method)
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
            out.dynamic = out.open = True
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
        if depth > 8:
            out.open = True
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
        out.open |= facts.dynamic or facts.all_fields
        for name in facts.merges:
            other = func.dicts.get(name)
            if other is not None:
                self._collect_dict(cls, ref, other, out, seen, depth)
            else:
                out.dynamic = out.open = True
        as_dict = self.contract.as_dict_method
        for callee in facts.sources:
            name = last_name(callee)
            head = callee[: -len(name) - 1] if "." in callee else ""
            if head == "super()" or (
                name == as_dict
                and head
                and self.hierarchy.resolve_class(head, cls.path) in self.hierarchy.mro(cls)
            ):
                out.calls_super = True
                parent = self.hierarchy.resolve_method(cls, name, after=ref.owner)
                if parent is not None and not parent.func.is_stub:
                    self._collect_function(cls, parent, out, depth + 1)
                elif parent is None and self.hierarchy.unknown_bases(ref.owner):
                    out.unknown_parent = out.open = True
                continue
            if head in ("self", "cls") or (func.params and head == func.params[0]):
                target = self.hierarchy.resolve_method(cls, name)
                if target is not None and target.func is not func:
                    self._collect_function(cls, target, out, depth + 1)
                    continue
            helper = self.hierarchy.resolve_function(callee, func.path) if not head else None
            if helper is not None:
                self._collect_function(cls, MethodRef(ref.owner, helper), out, depth + 1)
                continue
            out.dynamic = True
            out.unknown_sources.append(callee)
            if _dumps_fields(head, name, func):
                out.dumps.append(callee)
            else:
                out.open = True
        for call in facts.helpers:
            if last_name(call.callee) == self.contract.broadcast_function:
                continue
            target_func, offset = self._helper(cls, ref, call.callee)
            if target_func is None:
                out.dynamic = out.open = True
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
            target = self.hierarchy.resolve_method(cls, name)
            if target is None:
                return None, 0
            return target.func, 0 if target.func.is_staticmethod else 1
        if head:
            klass = self.hierarchy.resolve_class(head, ref.func.path)
            if klass is not None:
                target = self.hierarchy.resolve_method(klass, name)
                if target is not None:
                    return target.func, 1 if target.func.is_classmethod else 0
            return None, 0
        return self.hierarchy.resolve_function(callee, ref.func.path), 0

    def _fields_named(self, call: HelperCall, from_path: str) -> set[str]:
        """The dataclass fields of the classes passed to a helper that pops keys it
        computes (``_init_frozen_model_input_from_tensor_dict(ModelInputForGPU, d)``
        pops the fields of that class)."""
        out: set[str] = set()
        for name in call.arg_names:
            klass = self.hierarchy.resolve_class(name, from_path) if name else None
            fields = self.hierarchy.dataclass_fields(klass) if klass is not None else None
            if fields is not None:
                out |= set(fields)
        return out

    # -------------------------------------------------------- receivers
    def receivers(self, cls: ClassFacts) -> list[Receiver]:
        """``target(**tensor_dict)`` calls in the ``from_broadcasted_tensor_dict`` of ``cls``."""
        ref = self.hierarchy.resolve_method(cls, self.contract.from_dict_method)
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
                target = self.hierarchy.resolve_class(target_name, func.path)
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
                    if param.dynamic_pop:
                        receiver.popped |= self._fields_named(call, func.path)
            out.append(receiver)
        return out

    def required(self, cls: ClassFacts) -> Required | None:
        """The keys ``cls.from_broadcasted_tensor_dict`` reads with no default, following
        the dict into ``super()``, ``cls``/``self`` methods, methods of named classes and
        module-level helpers; None when the class has no such method."""
        ref = self.hierarchy.resolve_method(cls, self.contract.from_dict_method)
        if ref is None or ref.func.is_stub or len(ref.func.params) < 2:
            return None
        out = Required(ref)
        index = 0 if ref.func.is_staticmethod else 1
        self._require(cls, ref, index, out, set())
        return out

    def _require(
        self, cls: ClassFacts, ref: MethodRef, index: int, out: Required, seen: set[int]
    ) -> None:
        func = ref.func
        if id(func) in seen:
            return
        seen.add(id(func))
        facts = next((d for d in func.dicts.values() if d.param_index == index), None)
        if facts is None:
            return
        for key, at in facts.required.items():
            out.reads.setdefault(key, KeyRead(key, func.path, at.line, at.col, func.qualname))
        out.puts |= set(facts.keys)
        out.open |= facts.dynamic or facts.all_fields or bool(facts.merges or facts.sources)
        for call in facts.helpers:
            if last_name(call.callee) == self.contract.broadcast_function:
                continue
            name = last_name(call.callee)
            if call.callee == f"super().{name}":
                parent = self.hierarchy.resolve_method(cls, name, after=ref.owner)
                if parent is None or parent.func.is_stub:
                    out.open = True
                    continue
                offset = 0 if parent.func.is_staticmethod else 1
                self._require(cls, parent, call.arg_index + offset, out, seen)
                continue
            target, offset = self._helper(cls, ref, call.callee)
            if target is None:
                out.open = True
                continue
            self._require(cls, MethodRef(ref.owner, target), call.arg_index + offset, out, seen)

    # ------------------------------------------------- fields and copies
    def reads_unknown_parent(self, cls: ClassFacts) -> bool:
        """A dataclass whose broadcast dict calls ``super()`` into a base outside the
        analysed files: which fields it carries cannot be told."""
        produced = self.produced(cls) if cls.is_dataclass else None
        return produced is not None and produced.unknown_parent

    def from_dict_returns_fixed_class(self, cls: ClassFacts) -> bool:
        """``from_broadcasted_tensor_dict`` is a classmethod annotated to return its own
        fixed class (``-> "ModelInput"``) instead of ``Self``."""
        func = cls.methods.get(self.contract.from_dict_method)
        return (
            func is not None
            and func.is_classmethod
            and bool(func.params)
            and func.return_annotation == cls.name
        )

    def dict_copy(self, cls: ClassFacts) -> DictCopy | None:
        """A class's broadcast dict that re-lists its parent's literal dict instead of
        calling ``super()`` (what RC104 reports), compared key by key and statement by
        statement; None when there is no such copy."""
        own = cls.methods.get(self.contract.as_dict_method)
        if own is None or own.literal_dict is None or own.literal_dict.items is None:
            return None
        produced = self.produced(cls)
        if produced is None or produced.calls_super:
            return None
        parent_ref = self.hierarchy.resolve_method(cls, self.contract.as_dict_method, after=cls)
        if parent_ref is None or parent_ref.func.literal_dict is None:
            return None
        parent = parent_ref.func.literal_dict
        if parent.items is None:
            return None
        child = dict(own.literal_dict.items)
        parent_items = dict(parent.items)
        shared = [k for k in parent_items if k in child]
        if not shared:
            return None
        return DictCopy(
            parent=parent_ref.owner.name,
            parent_keys=tuple(parent_items),
            missing=tuple(sorted(set(parent_items) - set(child))),
            own_keys=tuple(k for k in child if child[k] != parent_items.get(k)),
            parent_mutations=len(parent.mutations),
            repeats_mutations=(
                own.literal_dict.mutations[: len(parent.mutations)] == parent.mutations
            ),
        )


def _dumps_fields(head: str, name: str, func: FunctionFacts) -> bool:
    """``value.asdict_zerocopy()`` (any ``*asdict*`` method) called on a value other
    than the one the function belongs to: a dump of that value's fields."""
    own = {"self", "cls", "super()", *func.params[:1]}
    return "asdict" in name and bool(head) and head not in own and not head.startswith("cls.")


@dataclass(frozen=True)
class DictCopy:
    """A subclass dict literal that copies its parent's (see :meth:`KeyFlow.dict_copy`)."""

    parent: str
    parent_keys: tuple[str, ...]
    #: Parent keys the copy leaves out (a drifted copy).
    missing: tuple[str, ...]
    #: Keys the child adds or gives another value.
    own_keys: tuple[str, ...]
    #: Statements between the parent's literal and its return.
    parent_mutations: int
    #: The child starts with the same statements.
    repeats_mutations: bool
