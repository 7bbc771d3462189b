"""The step walk: step-metadata broadcasts per path of one engine step (per role),
through ``self``/``super()`` calls and into the runner a worker drives, and the
collectives reachable from a method."""

from __future__ import annotations

from dataclasses import dataclass

from runnercheck.analysis.constants import (
    Bindings,
    Constants,
    branch_reachable,
    call_bindings,
    conditions_hold,
)
from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.model import (
    BranchStep,
    CallStep,
    ClassFacts,
    Condition,
    ExitStep,
    FunctionFacts,
    LoopStep,
    Role,
    RoleAssertStep,
    Step,
    TryStep,
    flatten_calls,
)
from runnercheck.analysis.roles import Roles

ROLES: tuple[Role, ...] = ("driver", "non-driver")


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
    """The most step broadcasts on one path, and where they are; how far the path goes
    into the runner's step (``stage``: 0 neither, 1 it prepares or rebuilds the model
    input, 2 it runs the model). A path that returns before the step, such as the stop
    signal or a dummy batch that never reaches the runner, is not a step."""

    count: int
    sites: tuple[BroadcastSite, ...] = ()
    stage: int = 0

    def __add__(self, other: PathCount) -> PathCount:
        return PathCount(
            self.count + other.count, self.sites + other.sites, max(self.stage, other.stage)
        )


ZERO = PathCount(0)
PREPARED = PathCount(0, (), 1)
RAN_MODEL = PathCount(0, (), 2)

#: ``self.<attr>(...)`` calls that run the model (or sample from its output): a
#: broadcast after one of them in the same function carries data of this step's result,
#: not metadata for it.
MODEL_ATTRS = ("model", "sampler")


def _best(a: PathCount | None, b: PathCount | None) -> PathCount | None:
    """The path that runs the model, else the one with more broadcasts."""
    if a is None:
        return b
    if b is None:
        return a
    if a.stage != b.stage:
        return a if a.stage > b.stage else b
    return b if b.count > a.count else a


def first_model_call(func: FunctionFacts) -> int | None:
    """The line of the first call of the model or the sampler in ``func`` (None: none)."""
    lines = [
        call.line
        for call in func.calls
        if not call.nested
        and any(
            call.callee == f"self.{attr}" or call.callee.startswith(f"self.{attr}.")
            for attr in MODEL_ATTRS
        )
    ]
    return min(lines) if lines else None


@dataclass(frozen=True)
class Reached:
    """A collective reached from a method, with the chain of methods that leads there."""

    site: BroadcastSite
    chain: tuple[str, ...]
    #: the call sits under a branch only the non-driver ranks take
    non_driver: bool = False
    #: the call, or a call on the chain to it, sits under a branch only the driver takes
    driver_only: bool = False


class StepWalk:
    """Broadcasts per step and the collectives a method reaches (a part of a project)."""

    def __init__(self, hierarchy: Hierarchy, roles: Roles) -> None:
        self.hierarchy = hierarchy
        self.roles = roles
        self.contract = hierarchy.contract
        self._count_memo: dict[tuple[int, int, str, Role, int], PathCount | None] = {}
        #: :func:`first_model_call` of each function walked (by ``id``), found once.
        self._model_lines: dict[int, int | None] = {}
        #: Constants and the branches they decide (a named part).
        self.constants = Constants(hierarchy)

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
            ref = self.hierarchy.resolve_method(cls, name, after=owner)
            return (cls, ref) if ref is not None else None
        if parts[0] in ("self", "cls") and len(parts) == 2:
            ref = self.hierarchy.resolve_method(cls, name)
            return (cls, ref) if ref is not None else None
        if parts[0] == "self" and len(parts) == 3:
            candidates = self.roles.runner_candidates(cls).get(parts[1], [])
            chosen: ClassFacts | None = None
            if runner is not None and runner in candidates:
                chosen = runner
            elif len(candidates) == 1:
                chosen = candidates[0]
            if chosen is None:
                return None
            ref = self.hierarchy.resolve_method(chosen, name)
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

    def _model_line(self, func: FunctionFacts) -> int | None:
        """:func:`first_model_call` of ``func``, found the first time it is asked for
        (every collective and loop of the function asks)."""
        key = id(func)
        if key not in self._model_lines:
            self._model_lines[key] = first_model_call(func)
        return self._model_lines[key]

    def _walk(
        self,
        steps: tuple[Step, ...],
        cls: ClassFacts,
        ref: MethodRef,
        role: Role,
        runner: ClassFacts | None,
        start: PathCount | None,
        local: Bindings | None = None,
    ) -> tuple[PathCount | None, PathCount | None]:
        """(best count falling through the block, best count of paths that returned).
        ``local``: names of the function known to hold a literal on this path (a loop
        variable on the first pass)."""
        running = start
        exited: PathCount | None = None
        for step in steps:
            if running is None:
                break
            if isinstance(step, CallStep):
                if step.collective is not None:
                    model_line = self._model_line(ref.func)
                    after_model = model_line is not None and step.line > model_line
                    if step.step_broadcast and not after_model:
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
                if running is not None and target[0] is not cls:
                    name = target[1].func.name
                    if name == self.contract.execute_method:
                        running = running + RAN_MODEL
                    elif name in (
                        self.contract.prepare_input_method,
                        self.contract.make_input_method,
                    ):
                        running = running + PREPARED
            elif isinstance(step, BranchStep):
                bindings = self.constants.self_bindings(cls)
                if local:
                    bindings = {**bindings, **local}
                then_live, else_live = branch_reachable(step, bindings)
                then_ok = then_live and (step.then_role is None or step.then_role == role)
                else_ok = else_live and (step.else_role is None or step.else_role == role)
                ft_then = ex_then = ft_else = ex_else = None
                if then_ok:
                    ft_then, ex_then = self._walk(step.body, cls, ref, role, runner, running, local)
                if else_ok:
                    ft_else, ex_else = self._walk(
                        step.orelse, cls, ref, role, runner, running, local
                    )
                exited = _best(exited, _best(ex_then, ex_else))
                running = _best(ft_then, ft_else)
            elif isinstance(step, LoopStep):
                # one pass counts a step; a loop around the model call runs its later
                # passes after the model ran, so its first pass is the one counted,
                # with the loop variable at its first value (``if i != 0:`` not taken)
                model_line = self._model_line(ref.func)
                inner = local
                if step.first is not None and model_line is not None:
                    if step.line <= model_line <= step.end_line:
                        inner = {**(local or {}), step.first[0]: step.first[1]}
                ft_body, ex_body = self._walk(step.body, cls, ref, role, runner, running, inner)
                exited = _best(exited, ex_body)
                running = _best(running, ft_body)
                if step.orelse:
                    ft_else, ex_else = self._walk(
                        step.orelse, cls, ref, role, runner, running, local
                    )
                    exited = _best(exited, ex_else)
                    running = ft_else
            elif isinstance(step, TryStep):
                ft_body, ex_body = self._walk(step.body, cls, ref, role, runner, running, local)
                exited = _best(exited, ex_body)
                after = ft_body
                if step.orelse:
                    ft_else, ex_else = self._walk(step.orelse, cls, ref, role, runner, after, local)
                    exited = _best(exited, ex_else)
                    after = ft_else
                for handler in step.handlers:
                    ft_h, ex_h = self._walk(handler, cls, ref, role, runner, running, local)
                    exited = _best(exited, ex_h)
                    after = _best(after, ft_h)
                if step.finalbody:
                    ft_f, ex_f = self._walk(step.finalbody, cls, ref, role, runner, after, local)
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
        ref = self.hierarchy.resolve_method(cls, name)
        out: dict[Role, PathCount] = {}
        for role in ROLES:
            if ref is None:
                out[role] = ZERO
                continue
            result = self._count_function(cls, ref, role, runner)
            out[role] = result if result is not None else ZERO
        return out

    # ------------------------------------------------------- collectives
    def _driver_condition(self, conditions: tuple[Condition, ...]) -> bool:
        """Some ``if`` around a call lets only the driver through."""
        flag = self.contract.driver_flag
        for condition in conditions:
            for guard in condition.guards:
                if guard.name.rsplit(".", 1)[-1] != flag:
                    continue
                truthy = guard.op == "truthy"
                alone = condition.complete and len(condition.guards) == 1
                if (truthy and condition.then) or (
                    guard.op == "falsy" and not condition.then and alone
                ):
                    return True
        return False

    def collectives_reachable(self, cls: ClassFacts, method: str) -> list[Reached]:
        """Every collective call reachable from ``cls.method`` through ``self``/``cls``/
        ``super()`` calls and module-level helpers (any role), with the literal
        arguments of each call carried into its callee: a branch those constants (or a
        constant ``self`` attribute) rule out is not followed."""
        ref = self.hierarchy.resolve_method(cls, method)
        if ref is None:
            return []
        found: dict[tuple[str, int, int], Reached] = {}
        self._reach(cls, ref, (ref.func.qualname,), {}, False, found, set())
        return list(found.values())

    def _reach(
        self,
        cls: ClassFacts,
        current: MethodRef,
        chain: tuple[str, ...],
        bindings: dict[str, str],
        driver: bool,
        found: dict[tuple[str, int, int], Reached],
        seen: set[tuple[int, frozenset[tuple[str, str]], bool]],
    ) -> None:
        """:meth:`collectives_reachable` from ``current`` (reached through ``chain``,
        with ``bindings``; ``driver``: on the driver's path only), into ``found``;
        ``seen``: what was visited with which bindings and path."""
        key = (id(current.func), frozenset(bindings.items()), driver)
        if key in seen:
            return
        seen.add(key)
        bound = {**self.constants.self_bindings(cls), **bindings}
        collectives = {(s.line, s.col) for s in flatten_calls(current.func.steps) if s.collective}
        for call in current.func.calls:
            if call.nested or (call.line, call.col) in collectives:
                continue
            if "." in call.callee.split("(", 1)[0].replace("?", ""):
                continue  # module-level helpers called by their bare name
            if not conditions_hold(call.conditions, bound):
                continue
            helper = self.hierarchy.resolve_function(call.callee, current.func.path)
            if helper is not None:
                inner = MethodRef(current.owner, helper)
                self._reach(
                    cls,
                    inner,
                    (*chain, helper.qualname),
                    call_bindings(call, inner, bound, self_bound=False),
                    driver or self._driver_condition(call.conditions),
                    found,
                    seen,
                )
        for step, side in reachable_calls(current.func.steps, bound):
            if step.collective is not None:
                site = BroadcastSite(
                    current.func.path,
                    step.line,
                    step.col,
                    current.func.qualname,
                    step.callee,
                )
                found.setdefault(
                    (site.path, site.line, site.col),
                    Reached(site, chain, side == "non-driver", driver or side == "driver"),
                )
                continue
            parts = step.callee.split(".")
            if len(parts) != 2 or parts[0] not in ("self", "cls", "super()"):
                continue
            target = self._dispatch(cls, current.owner, current.func, step.callee, None)
            if target is not None:
                callee = target[1]
                self._reach(
                    cls,
                    callee,
                    (*chain, callee.func.qualname),
                    call_bindings(step, callee, bound, self_bound=not callee.func.is_staticmethod),
                    driver or side == "driver",
                    found,
                    seen,
                )


def reachable_calls(
    steps: tuple[Step, ...], bindings: Bindings, side: Role | None = None
) -> list[tuple[CallStep, Role | None]]:
    """The calls of ``steps`` that may run under ``bindings``, in order, each with the
    role of the innermost branch on the driver flag around it (None: every rank)."""
    out: list[tuple[CallStep, Role | None]] = []
    for step in steps:
        if isinstance(step, CallStep):
            out.append((step, side))
        elif isinstance(step, BranchStep):
            then_ok, else_ok = branch_reachable(step, bindings)
            if then_ok:
                out += reachable_calls(step.body, bindings, step.then_role or side)
            if else_ok:
                out += reachable_calls(step.orelse, bindings, step.else_role or side)
        elif isinstance(step, LoopStep):
            out += reachable_calls(step.body, bindings, side)
            out += reachable_calls(step.orelse, bindings, side)
        elif isinstance(step, TryStep):
            for block in (step.body, *step.handlers, step.orelse, step.finalbody):
                out += reachable_calls(block, bindings, side)
    return out
