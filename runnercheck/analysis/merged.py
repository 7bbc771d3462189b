"""The merged dict: one broadcast per step carries several parts (the worker input, the
model input, extras), and the receiving ranks consume that same dict part after part.

For a worker and a runner it drives, :meth:`MergedDicts.merged_step` finds the dict
the driver sends and the dict the other ranks receive (in any method of the worker,
along its MRO), the parts the receiving side rebuilds (``WorkerInput.from_...(d)``,
``self.model_runner.make_model_input_from_...(d)``, module-level helpers), and walks
them in order: a key a part reads without ``pop`` stays in the dict and reaches the
next part's ``cls(**d)``; an extra extracted after the model input was rebuilt has
already reached it. Each key that reaches a ``**`` call that does not accept it is a
:class:`Leak` (a ``TypeError`` on every non-driver rank, only at tensor-parallel > 1).
The keys alive at each constructor are *delivered* to that class: a field delivered
through another part's key is broadcast.

Only literal keys are followed. A pop whose key is computed (``for f in
fields(metadata_cls): d.pop(f.name)``) removes the keys a twin helper added from the
same class, none of the literal ones, so it is not taken to remove them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.keyflow import KeyFlow
from runnercheck.analysis.model import (
    ClassFacts,
    DictFacts,
    FieldFacts,
    FunctionFacts,
    HelperCall,
    KeyFacts,
)
from runnercheck.analysis.recognise import is_step_broadcast
from runnercheck.analysis.roles import Roles
from runnercheck.analysis.syntax import last_name


@dataclass(frozen=True)
class Origin:
    """Where a key of the merged dict comes from."""

    key: str
    path: str
    line: int
    #: The part that produces it (``"WorkerInput"``) or the extra's function.
    part: str
    #: Where a part that rebuilt itself read the key without popping it, if it did:
    #: the read (``tensor_dict["virtual_engine"]``) when it has no default, else the
    #: ``def`` of the method that reads it; (path, line, column).
    read_without_pop: tuple[str, int, int] | None = None
    #: Merged in by the driver's step besides the parts (``part`` is that step).
    extra: bool = False


@dataclass(frozen=True)
class Leak:
    """A key of the merged dict that reaches a ``**`` call that does not accept it."""

    origin: Origin
    #: The class built with ``target(**d)`` and where.
    target: ClassFacts
    path: str
    line: int
    col: int
    worker: ClassFacts
    runner: ClassFacts | None
    #: The method that receives and rebuilds the step (``"Worker.execute_model"``).
    step: str = ""


@dataclass
class MergedStep:
    """One worker's (and runner's) merged broadcast, as sent and as consumed."""

    worker: ClassFacts
    runner: ClassFacts | None
    send: MethodRef
    receive: MethodRef
    leaks: list[Leak] = field(default_factory=list)
    #: Per class built from the dict (by id): the keys alive at its ``**`` call.
    delivered: dict[int, set[str]] = field(default_factory=dict)
    #: Per part rebuilt from the dict (by id): the keys alive when it starts.
    offered: dict[int, set[str]] = field(default_factory=dict)
    #: The parts the receiving ranks rebuild from the dict, in that order.
    parts: list[ClassFacts] = field(default_factory=list)


@dataclass
class _Walk:
    alive: dict[str, Origin]
    step: MergedStep
    #: An unknown consumer ran: later leaks cannot be told.
    uncertain: bool = False


class MergedDicts:
    """The merged step of each worker and what its dict delivers (a part of a project)."""

    def __init__(self, hierarchy: Hierarchy, roles: Roles, keys: KeyFlow) -> None:
        self.hierarchy = hierarchy
        self.roles = roles
        self.keys = keys
        self.contract = hierarchy.contract
        self._steps: list[MergedStep] | None = None
        self._built: list[tuple[ClassFacts, set[str]]] | None = None

    # ------------------------------------------------------------ finding
    def merged_steps(self) -> list[MergedStep]:
        """Every concrete worker's merged step with each runner it may drive."""
        if self._steps is None:
            self._steps = []
            for worker in self.roles.workers():
                if self.roles.is_abstract(worker):
                    continue
                runners: list[ClassFacts | None] = [
                    r for rs in self.roles.runner_candidates(worker).values() for r in rs
                ]
                for runner in runners or [None]:
                    step = self.merged_step(worker, runner)
                    if step is not None:
                        self._steps.append(step)
        return self._steps

    def delivered_keys(self, cls: ClassFacts) -> set[str]:
        """Keys some merged dict delivers to ``cls(**d)``. A base that the receiving
        ranks only build through subclasses (``ModelInput`` declares the field,
        ``ModelInputWithSampling(**d)`` is what runs) gets the keys delivered to every
        such subclass: each of them inherits the field and receives it."""
        built = [
            keys
            for klass, keys in self._built_from_merged()
            if any(base is cls for base in self.hierarchy.mro(klass))
        ]
        return set.intersection(*built) if built else set()

    def offered_keys(self, cls: ClassFacts) -> set[str]:
        """Keys some merged dict holds when the receiving ranks rebuild ``cls`` from it
        (its own, the other parts' not yet popped, the extras)."""
        return {k for step in self.merged_steps() for k in step.offered.get(id(cls), ())}

    def _built_from_merged(self) -> list[tuple[ClassFacts, set[str]]]:
        """Each class some merged dict builds, with the keys alive at its ``**`` calls."""
        if self._built is None:
            per_class: dict[int, set[str]] = {}
            for step in self.merged_steps():
                for key, keys in step.delivered.items():
                    per_class.setdefault(key, set()).update(keys)
            self._built = [
                (klass, per_class[id(klass)])
                for klass in self.hierarchy.all_classes()
                if id(klass) in per_class
            ]
        return self._built

    def unbroadcast_fields(self, cls: ClassFacts) -> list[FieldFacts]:
        """Own dataclass fields of ``cls`` that its broadcast dict never carries and
        that are not declared driver-only, nor delivered by another part's key of a
        merged dict (RC103; the ``driver-only`` codemod marks
        exactly these). Empty when ``cls`` is no broadcast input or its dict cannot be
        read completely."""
        if not cls.is_dataclass or not cls.fields:
            return []
        produced = self.keys.produced(cls)
        if produced is None or produced.all_fields or produced.unknown_parent:
            return []
        delivered = self.delivered_keys(cls)
        return [
            fld
            for fld in cls.fields
            if fld.name not in produced.keys
            and fld.name not in produced.fields
            and fld.name not in delivered
            and not self.hierarchy.is_driver_only(cls, fld)
        ]

    def merged_step(self, worker: ClassFacts, runner: ClassFacts | None) -> MergedStep | None:
        """The worker's merged step, or None when it has not exactly one send and one
        receive of the step broadcast."""
        sends: list[tuple[MethodRef, DictFacts]] = []
        receives: list[tuple[MethodRef, DictFacts]] = []
        function = self.contract.broadcast_function
        names = {name for klass in self.hierarchy.mro(worker) for name in klass.methods}
        for name in sorted(names):
            ref = self.hierarchy.resolve_method(worker, name)
            if ref is None:
                continue
            for facts in ref.func.dicts.values():
                if any(
                    is_step_broadcast(h.callee, function) and h.arg_index == 0
                    for h in facts.helpers
                ):
                    sends.append((ref, facts))
                if any(is_step_broadcast(s, function) for s in facts.sources):
                    receives.append((ref, facts))
        sends = [s for s in sends if not s[1].name.startswith("<")]
        # a control broadcast beside the step's (``{"is_dummy_batch": ...}`` sent and
        # received on its own) carries no part: the merged step is the one that does
        receives = [r for r in receives if self._rebuilds_parts(r[1])] or receives
        if len(sends) != 1 or len(receives) != 1:
            return None
        (send_ref, send), (recv_ref, received) = sends[0], receives[0]
        step = MergedStep(worker, runner, send_ref, recv_ref)
        walk = _Walk(self._extras(worker, send_ref, send), step)
        events: list[tuple[int, str | HelperCall]] = [
            (line, key) for key, line in received.pops.items()
        ]
        events += [
            (call.line, call)
            for call in received.helpers
            if not is_step_broadcast(call.callee, function)  # the driver's send, same name
        ]
        consumers = [(line, ev) for line, ev in events if isinstance(ev, HelperCall)]
        for _, call in consumers:  # every part that rebuilds itself produced its keys
            for part in self._parts(worker, runner, recv_ref, call):
                self._produce(part, walk)
        for _, event in sorted(events, key=lambda e: e[0]):
            if isinstance(event, str):
                walk.alive.pop(event, None)
            else:
                self._consume(worker, runner, recv_ref, event, walk)
        return step

    def _rebuilds_parts(self, received: DictFacts) -> bool:
        """The received dict is handed to something that rebuilds a part from it."""
        function = self.contract.broadcast_function
        return any(not is_step_broadcast(h.callee, function) for h in received.helpers)

    # ----------------------------------------------------------- producers
    def _extras(self, worker: ClassFacts, ref: MethodRef, send: DictFacts) -> dict[str, Origin]:
        """Keys the driver adds besides the parts: literal keys and merged dicts that do
        not come from a part's ``as_broadcastable_tensor_dict``."""
        out: dict[str, Origin] = {}
        where = ref.func.qualname
        for key, kf in send.keys.items():
            out[key] = Origin(key, kf.path, kf.line, where, extra=True)
        for name in send.merges:
            for kf in self._dict_keys(worker, ref, name):
                out.setdefault(kf.key, Origin(kf.key, kf.path, kf.line, where, extra=True))
        return out

    def _dict_keys(self, worker: ClassFacts, ref: MethodRef, name: str) -> list[KeyFacts]:
        """Literal keys of the local dict ``name``, or of what the call it was assigned
        from returns (``kwargs = extract_previous_hidden_states(req)``)."""
        facts = ref.func.dicts.get(name)
        if facts is not None and facts.keys:
            return list(facts.keys.values())
        callee = ref.func.assigned_calls.get(name)
        if callee is None:
            return []
        target, _ = self.keys._helper(worker, ref, callee)
        if target is None:
            return []
        return [
            kf for r in target.returns if r in target.dicts for kf in target.dicts[r].keys.values()
        ]

    def _produce(self, part: ClassFacts, walk: _Walk) -> None:
        produced = self.keys.produced(part)
        if produced is None:
            return
        reads = self._reads_without_pop(part)
        for key, kf in produced.keys.items():
            read = reads.get(key)
            walk.alive.setdefault(key, Origin(key, kf.path, kf.line, part.name, read))

    def _reads_without_pop(self, part: ClassFacts) -> dict[str, tuple[str, int, int]]:
        ref = self.hierarchy.resolve_method(part, self.contract.from_dict_method)
        param = self._dict_param(ref)
        if ref is None or param is None:
            return {}
        func = ref.func
        out: dict[str, tuple[str, int, int]] = {}
        for key in param.reads:
            if key in param.pops:
                continue
            read = param.required.get(key)
            out[key] = (
                (func.path, read.line, read.col)
                if read is not None
                else (func.path, func.line, func.col)
            )
        return out

    # ----------------------------------------------------------- consumers
    def _parts(
        self, worker: ClassFacts, runner: ClassFacts | None, ref: MethodRef, call: HelperCall
    ) -> list[ClassFacts]:
        """The input classes a consumer call rebuilds from the dict."""
        target = self._consumer(worker, runner, ref, call)
        if target is None:
            return []
        owner, func, _ = target
        if func.name == self.contract.from_dict_method and owner is not None:
            return [owner]
        param = self._param_dict(func, target[2] + call.arg_index)
        if param is None:
            return []
        out: list[ClassFacts] = []
        inner_ref = MethodRef(owner or worker, func)
        for inner in param.helpers:
            if last_name(inner.callee) == self.contract.from_dict_method:
                klass = self._input_class(owner or worker, inner_ref, inner.callee)
                if klass is not None:
                    out.append(klass)
        return out

    def _consumer(
        self, worker: ClassFacts, runner: ClassFacts | None, ref: MethodRef, call: HelperCall
    ) -> tuple[ClassFacts | None, FunctionFacts, int] | None:
        """(the class whose method it is, the function, its parameter offset)."""
        parts = call.callee.split(".")
        if parts[0] == "self" and len(parts) == 3 and runner is not None:
            candidates = self.roles.runner_candidates(worker).get(parts[1], [])
            if runner in candidates:
                found = self.hierarchy.resolve_method(runner, parts[2])
                if found is not None:
                    return runner, found.func, 0 if found.func.is_staticmethod else 1
            return None
        if len(parts) == 2 and parts[0] not in ("self", "cls", "super()"):
            klass = self.hierarchy.resolve_class(parts[0], ref.func.path)
            if klass is not None:
                found = self.hierarchy.resolve_method(klass, parts[1])
                if found is None:
                    return None
                return klass, found.func, 1 if found.func.is_classmethod else 0
        func, offset = self.keys._helper(worker, ref, call.callee)
        return (None, func, offset) if func is not None else None

    def _input_class(self, owner: ClassFacts, ref: MethodRef, callee: str) -> ClassFacts | None:
        """The class of ``X.from_broadcasted_tensor_dict`` called in a runner method:
        a class name, ``self.<attr>`` naming a class, or ``cls``."""
        head = callee.rsplit(".", 1)[0]
        if head in ("cls",) or (ref.func.params and head == ref.func.params[0]):
            return owner
        if head.startswith("self."):
            attr = head.split(".", 1)[1]
            holder = self.hierarchy.defines(owner, attr)
            names = holder.class_attrs.get(attr, ()) if holder is not None else ()
            for name in names:
                found = self.hierarchy.resolve_class(name, holder.path if holder else owner.path)
                if found is not None:
                    return found
            return None
        return self.hierarchy.resolve_class(head, ref.func.path)

    def _consume(
        self,
        worker: ClassFacts,
        runner: ClassFacts | None,
        ref: MethodRef,
        call: HelperCall,
        walk: _Walk,
    ) -> None:
        target = self._consumer(worker, runner, ref, call)
        if target is None:
            walk.uncertain = True
            return
        owner, func, offset = target
        if func.name == self.contract.from_dict_method and owner is not None:
            self._rebuild(owner, walk, worker, runner)
            return
        param = self._param_dict(func, offset + call.arg_index)
        if param is None:
            return
        inner_ref = MethodRef(owner or worker, func)
        events: list[tuple[int, str | HelperCall]] = [(ln, k) for k, ln in param.pops.items()]
        events += [(c.line, c) for c in param.helpers]
        for _, event in sorted(events, key=lambda e: e[0]):
            if isinstance(event, str):
                walk.alive.pop(event, None)
            elif last_name(event.callee) == self.contract.from_dict_method:
                klass = self._input_class(owner or worker, inner_ref, event.callee)
                if klass is None:
                    walk.uncertain = True
                else:
                    self._rebuild(klass, walk, worker, runner)
        if param.constructs:
            walk.uncertain = True

    def _rebuild(
        self, part: ClassFacts, walk: _Walk, worker: ClassFacts, runner: ClassFacts | None
    ) -> None:
        """``part.from_broadcasted_tensor_dict(d)``: its ``**`` calls see the keys alive
        (minus what it pops first); afterwards, what it pops is gone."""
        walk.step.offered.setdefault(id(part), set()).update(walk.alive)
        if not any(known is part for known in walk.step.parts):
            walk.step.parts.append(part)
        for receiver in self.keys.receivers(part):
            target = receiver.target
            alive = {k: o for k, o in walk.alive.items() if k not in receiver.popped}
            if target is not None:
                walk.step.delivered.setdefault(id(target), set()).update(alive)
            if walk.uncertain or target is None:
                continue
            if "__init__" in target.methods:
                continue
            fields = self.hierarchy.dataclass_fields(target)
            if fields is None or not any(k.is_dataclass for k in self.hierarchy.mro(target)):
                continue
            accepted = {name for name, (_, fld) in fields.items() if fld.init}
            own = {k.name for k in self.hierarchy.mro(part)}
            for key, origin in alive.items():
                if key in accepted or origin.part in own:
                    continue
                walk.step.leaks.append(
                    Leak(
                        origin,
                        target,
                        receiver.method.func.path,
                        receiver.line,
                        receiver.col,
                        worker,
                        runner,
                        walk.step.receive.func.qualname,
                    )
                )
        ref = self.hierarchy.resolve_method(part, self.contract.from_dict_method)
        param = self._dict_param(ref)
        if param is not None:
            for key in param.pops:
                walk.alive.pop(key, None)

    # -------------------------------------------------------------- helpers
    def _dict_param(self, ref: MethodRef | None) -> DictFacts | None:
        if ref is None or len(ref.func.params) < 2:
            return None
        func = ref.func
        offset = 0 if func.is_staticmethod else 1
        return self._param_dict(func, offset)

    @staticmethod
    def _param_dict(func: FunctionFacts, index: int) -> DictFacts | None:
        return next((d for d in func.dicts.values() if d.param_index == index), None)
