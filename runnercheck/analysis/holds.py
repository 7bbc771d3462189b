"""What a non-driver rank holds at each entry point of a step: the literal flags its
path gives the objects it builds (``SamplingMetadata(..., perform_sampling=False)``).

Entry points of a runner: every worker step that drives it (``Worker.execute_model``),
every other worker method that runs its ``execute_model`` (a worker's warm-up), and
every method of the runner, other than the contract's own, that runs its
``execute_model`` (``profile_run``, warm-up and dummy runs). From each, the path a
non-driver rank takes is followed through ``self``/``super()`` calls, the runner the
worker holds, ``Class.method(...)`` calls and module-level helpers, leaving out
branches only the driver takes. Every construction of a class on that path is read
with its keyword arguments.

A rewrite must not change them: where the old code built ``C(flag=<literal>)`` on a
non-driver path, the new code must build ``C`` with the same literal on the path from
the same entry point, or with the driver flag where that literal is what it holds
there (``perform_sampling=self.is_driver_worker`` is ``False`` on a non-driver rank). The flags compared are literal booleans: switches of behaviour.
A ``None`` or a zero count is what a rank that lacks the data holds, and the driver's
own value replacing it is the point of the merge; the driver's own values are the
driver's business (it prepared them before and after).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from runnercheck.analysis.hierarchy import MethodRef
from runnercheck.analysis.model import CallSite, ClassFacts
from runnercheck.analysis.stepwalk import reachable_calls

if TYPE_CHECKING:
    from runnercheck.analysis.constants import Bindings
    from runnercheck.analysis.project import Project

#: What a keyword holds when the constructor call leaves it out.
DEFAULT = "its default"
#: The pseudo keyword of a class built by a factory (``C.prepare(...)``).
FACTORY = "<factory>"


@dataclass(frozen=True)
class Held:
    """A keyword of a class built on a non-driver path, and the value given there."""

    entry: str
    cls: str
    keyword: str
    value: str


class NonDriverValues:
    """The non-driver constructions of each entry point of a project's runners."""

    def __init__(self, project: Project) -> None:
        self.p = project

    # ---------------------------------------------------------------- entries
    def entries(self) -> dict[str, tuple[ClassFacts, MethodRef, ClassFacts | None]]:
        """``"Worker.execute_model with ModelRunner"`` / ``"ModelRunner.profile_run"`` /
        ``"Worker.warm_up with ModelRunner"`` (a worker method other than the step that
        runs the runner's step) -> (the class the method runs on, the method, the runner
        a worker drives)."""
        p = self.p
        contract = p.contract
        own = {
            contract.execute_method,
            contract.prepare_input_method,
            contract.make_input_method,
        }
        out: dict[str, tuple[ClassFacts, MethodRef, ClassFacts | None]] = {}
        for worker, runner in p.worker_runner_pairs():
            if p.is_abstract(worker):
                continue
            ref = p.resolve_method(worker, contract.execute_method)
            if ref is not None:
                out[f"{worker.name}.{contract.execute_method} with {runner.name}"] = (
                    worker,
                    ref,
                    runner,
                )
            # other callers of the runner's step: a worker's warm-up or dummy run
            names = {name for klass in p.mro(worker) for name in klass.methods} - own
            for name in sorted(names):
                other = p.resolve_method(worker, name)
                if other is None or other.func.is_stub:
                    continue
                if any(
                    c.callee.startswith("self.")
                    and c.callee.count(".") == 2
                    and c.callee.endswith(f".{contract.execute_method}")
                    for c in other.func.calls
                ):
                    out[f"{worker.name}.{name} with {runner.name}"] = (worker, other, runner)
        for runner in p.runners():
            names = {name for klass in p.mro(runner) for name in klass.methods} - own
            for name in sorted(names):
                ref = p.resolve_method(runner, name)
                if ref is None or ref.func.is_stub:
                    continue
                callees = {c.callee for c in ref.func.calls}
                if f"self.{contract.execute_method}" in callees:
                    out[f"{runner.name}.{name}"] = (runner, ref, runner)
        return out

    # ------------------------------------------------------------------ walk
    def held(self) -> list[Held]:
        """Every literal keyword (not ``None``) of a class built on a non-driver path,
        and, for the same classes, keywords left to their default, per entry."""
        out: list[Held] = []
        for entry, (cls, ref, runner) in self.entries().items():
            for call in self._constructions(cls, ref, runner):
                head, _, name = call.callee.rpartition(".")
                if not name[:1].isupper():  # a factory: what it gives is not read here
                    klass = head.rsplit(".", 1)[-1]
                    out.append(Held(entry, klass, FACTORY, f"what {klass}.{name}(...) gives"))
                    continue
                given = dict(call.kwargs)
                for keyword, text in given.items():
                    out.append(Held(entry, name, keyword, self._non_driver(text) or "?"))
                if not call.star_kwargs:
                    out.append(Held(entry, name, "*", ",".join(sorted(given))))
        return out

    def _constructions(
        self, cls: ClassFacts, ref: MethodRef, runner: ClassFacts | None
    ) -> list[CallSite]:
        found: list[CallSite] = []
        bindings = self.p.constants.self_bindings(cls)
        self._construct(cls, ref, runner, bindings, found, set())
        return found

    def _construct(
        self,
        owner_cls: ClassFacts,
        current: MethodRef,
        runner: ClassFacts | None,
        bindings: Bindings,
        found: list[CallSite],
        seen: set[int],
    ) -> None:
        """:meth:`_constructions` from ``current`` (a method of ``owner_cls``), into
        ``found``; ``seen``: the functions visited (by ``id``)."""
        p = self.p
        if id(current.func) in seen:
            return
        seen.add(id(current.func))
        for call in current.func.calls:
            if call.nested or call.role == "driver" or self._driver_only(call):
                continue
            head, _, name = call.callee.rpartition(".")
            if name[:1].isupper() and "(" not in call.callee:
                found.append(call)
                continue
            if head and head not in ("self", "cls", "super()") and "(" not in head:
                klass = p.resolve_class(head, current.func.path)
                target = p.resolve_method(klass, name) if klass is not None else None
                if klass is not None and target is not None:
                    self._construct(klass, target, runner, bindings, found, seen)
                elif head.rsplit(".", 1)[-1][:1].isupper():
                    found.append(call)  # a factory of a class not read: ``C.prepare()``
                continue
            if not head:
                helper = p.resolve_function(call.callee, current.func.path)
                if helper is not None:
                    inner = MethodRef(current.owner, helper)
                    self._construct(owner_cls, inner, runner, bindings, found, seen)
        roles = {(c.line, c.col): c.role for c in current.func.calls}
        for step, side in reachable_calls(current.func.steps, bindings):
            role = side or roles.get((step.line, step.col))
            if role == "driver" or step.collective is not None:
                continue
            dispatched = p.steps._dispatch(
                owner_cls, current.owner, current.func, step.callee, runner
            )
            if dispatched is not None:
                self._construct(dispatched[0], dispatched[1], runner, bindings, found, seen)

    def _non_driver(self, text: str) -> str:
        """What an argument holds on a non-driver rank: the driver flag is False there
        (``perform_sampling=self.is_driver_worker`` gives ``False``)."""
        flag = f"self.{self.p.contract.driver_flag}"
        return {flag: "False", f"not {flag}": "True"}.get(text, text)

    def _driver_only(self, call: CallSite) -> bool:
        return self.p.steps._driver_condition(call.conditions)


@dataclass(frozen=True)
class ChangedValue:
    """A non-driver value a rewrite changes."""

    entry: str
    cls: str
    keyword: str
    before: str
    after: str

    def describe(self) -> str:
        return (
            f"at {self.entry}, a non-driver rank built {self.cls}({self.keyword}="
            f"{self.before}) before the rewrite and gets {self.after} after it"
        )


def changed_values(old: list[Held], new: list[Held]) -> list[ChangedValue]:
    """The literal keywords the old non-driver paths gave (not ``None``) that the new
    paths from the same entry points give otherwise: another literal, a computed value,
    or the default."""
    new_by = {(h.entry, h.cls, h.keyword): h.value for h in new if h.keyword != "*"}
    new_built = {(h.entry, h.cls) for h in new}
    factory = {(h.entry, h.cls): h.value for h in new if h.keyword == FACTORY}
    direct = {(h.entry, h.cls) for h in new if h.keyword == "*"}
    new_entries = {h.entry for h in new}
    out: list[ChangedValue] = []
    for h in old:
        if h.keyword in ("*", FACTORY) or h.value in ("None", "?") or h.entry not in new_entries:
            continue
        if not _literal(h.value):
            continue
        if (h.entry, h.cls) not in new_built:
            continue  # built elsewhere now (received): not a value read here
        key = (h.entry, h.cls)
        after = new_by.get((*key, h.keyword))
        if after is None:
            after = DEFAULT if key in direct else factory.get(key, DEFAULT)
        if after != h.value:
            change = ChangedValue(h.entry, h.cls, h.keyword, h.value, after)
            if change not in out:
                out.append(change)
    return out


def _literal(text: str) -> bool:
    """A switch: a literal ``True``/``False`` (a count of zero or a ``None`` is what a
    rank without the data holds, and the driver's own count replaces it)."""
    return text in ("True", "False")
