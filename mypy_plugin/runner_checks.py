"""Checks of one model-runner class against its input type ``T``.

* RC201 ``runner-input-protocol``: ``T`` has ``as_broadcastable_tensor_dict`` (an
  instance method, no required argument, returns a dict) and the classmethod
  ``from_broadcasted_tensor_dict`` (the tensor dict as its one required argument).
* RC203 ``runner-input-covariance``: ``prepare_model_input`` and
  ``make_model_input_from_broadcasted_tensor_dict`` return ``T`` or a subtype.
* RC204 ``execute-input-mismatch``: ``execute_model``'s ``model_input`` accepts ``T``.
* RC207 ``runner-input-unbound``: the class statement binds ``T`` (not ``Any``, written
  or left out).

RC203 and RC204 read a decorated method's signature as :mod:`mypy_plugin.decorators`
says: the declared one under a decorator that keeps it or whose type is unknown, else
what mypy inferred.

What plain mypy reports already is left to it: a ``T`` outside the base's type
variable bound (``[type-var]``; RC201 still says which member fails and why, which
"must be a subtype" does not), an override incompatible with the method it overrides
(``[override]``, only where mypy compares the two: not when a decorator made either
``Any``), and an unbound ``T`` under ``disallow_any_generics`` (``[type-arg]``) or
``disallow_any_explicit`` (``[explicit-any]``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mypy.nodes import ARG_OPT, ARG_POS, ARG_STAR, NOT_ABSTRACT, TypeInfo
from mypy.subtypes import is_subtype
from mypy.types import (
    AnyType,
    Instance,
    ProperType,
    Type,
    TypeOfAny,
    TypeVarType,
    get_proper_type,
)

from mypy_plugin import errors
from mypy_plugin.config import PluginSettings
from mypy_plugin.decorators import (
    checked_signature,
    checked_signature_for,
    mypy_compares,
    parameter_at,
    parameter_text,
)
from mypy_plugin.members import (
    Member,
    definitions,
    find_member,
    overridden,
    parameter_type,
)
from mypy_plugin.report import Reporter
from mypy_plugin.runner_input import (
    input_classes,
    input_type,
    runner_base,
    unbound_base,
    unpacked_argument,
)

_KIND_TEXT = {
    "method": "an instance method",
    "classmethod": "a classmethod",
    "staticmethod": "a staticmethod",
    "property": "a property",
    "attribute": "an attribute",
}


@dataclass(frozen=True)
class Problem:
    """Why a member breaks the protocol; ``mypy_checks_override``: an override with this
    problem of a correct definition is an ``[override]`` error already."""

    text: str
    mypy_checks_override: bool = True


ProblemOf = Callable[[Member], "Problem | None"]


def _mypy_reports_override(
    info: TypeInfo, member: Member, problem: Problem, problem_of: ProblemOf
) -> bool:
    """A broken override of a correct definition is already mypy's [override] error."""
    if not problem.mypy_checks_override:
        return False
    return any(
        problem_of(ancestor) is None
        for ancestor in definitions(info, member.name)
        if ancestor.owner is not member.owner
    )


class RunnerChecker:
    """Runs RC201/RC203/RC204/RC207 on ``info`` if it is a runner."""

    def __init__(
        self,
        info: TypeInfo,
        settings: PluginSettings,
        reporter: Reporter,
        known: dict[object, object] | None = None,
    ) -> None:
        self.info = info
        self.settings = settings
        self.config = settings.config
        self.reporter = reporter
        #: What is decided once per run and shared by the run's runners: the types
        #: ``dict[str, Any]``..., and the protocol verdict on each definition.
        self.known = known if known is not None else {}
        self.base: TypeInfo | None = None
        #: Modules whose changes must re-check this runner (``T``'s classes, the bases).
        self.dependencies: set[str] = set()

    @property
    def tensor_dict_type(self) -> Instance:
        """``dict[str, Any]``: what the classmethod receives."""
        return self._str_keyed("builtins.dict")

    @property
    def mapping_type(self) -> Instance:
        """``Mapping[str, Any]``: what the instance method must return."""
        return self._str_keyed("typing.Mapping")

    def _str_keyed(self, fullname: str) -> Instance:
        made = self.known.get(fullname)
        if not isinstance(made, Instance):
            api = self.reporter.api
            str_type = api.named_generic_type("builtins.str", [])
            any_type = AnyType(TypeOfAny.special_form)
            made = self.known[fullname] = api.named_generic_type(fullname, [str_type, any_type])
        return made

    def _problem(self, member: Member, problem_of: ProblemOf) -> Problem | None:
        """``problem_of(member)``, decided once per definition and run."""
        key = (member.owner, member.name)
        if key not in self.known:
            self.known[key] = problem_of(member)
        found = self.known[key]
        return found if isinstance(found, Problem) else None

    def _takes_own_type_var(self, member: Member, index: int) -> bool:
        """Whether parameter ``index`` of the base's own definition is declared as the
        base's type variable ``T`` itself: it takes the runner's input type then."""
        base, signature = self.base, checked_signature(member)
        if base is None or member.owner is not base or signature is None:
            return False
        declared = parameter_type(signature, index)
        type_vars = base.defn.type_vars
        return (
            isinstance(declared, TypeVarType)
            and bool(type_vars)
            and isinstance(type_vars[0], TypeVarType)
            and declared.id == type_vars[0].id
        )

    def _override_reported(self, member: Member, base: Member) -> bool:
        """Whether an override incompatible with ``base`` is mypy's ``[override]``: mypy
        compares the two, or the ``def`` line silences ``[override]`` (its author made
        the override incompatible on purpose, for mypy runs that can compare it)."""
        if mypy_compares(member, base):
            return True
        func = member.func
        return func is not None and self.reporter.silences("override", func.line)

    def run(self, base: TypeInfo | None = None) -> None:
        """The checks, if ``info`` is a runner (``base``: its runner base, if known)."""
        if base is None:
            base = runner_base(self.info, self.settings.runner_bases)
        if base is None:
            return
        self.base = base
        t = input_type(self.info, base)
        if t is None:
            return
        if isinstance(get_proper_type(t), AnyType):
            self.check_unbound(base)
            return
        self._record_dependencies(t)
        if not self._within_bound(base, t):
            # mypy reports [type-var] ("must be a subtype") where the type argument is
            # written; say which member of the protocol fails and why, which it does not
            # (whether that error is shown or ignored)
            self.check_protocol(t)
            return
        self.check_protocol(t)
        self.check_returns(t)
        self.check_execute(t)

    # ------------------------------------------------------------------ helpers
    def _record_dependencies(self, t: Type) -> None:
        infos = [info for _, info in input_classes(t)] + [self.info]
        for info in infos:
            for cls in info.mro:
                if cls.module_name != "builtins":
                    self.dependencies.add(cls.module_name)

    @staticmethod
    def _within_bound(base: TypeInfo, t: Type) -> bool:
        type_var = base.defn.type_vars[0] if base.defn.type_vars else None
        if not isinstance(type_var, TypeVarType):
            return True
        return is_subtype(t, type_var.upper_bound)

    def _subject(self, t: Type, item: ProperType) -> str:
        fmt = self.reporter.fmt
        proper = get_proper_type(t)
        shown = fmt(t)
        if isinstance(proper, TypeVarType):
            shown += f" ({'constraint' if proper.values else 'bound'} {fmt(item)})"
        elif item is not proper:
            shown += f" (item {fmt(item)})"
        return f'Input type {shown} of runner "{self.info.name}"'

    def _checked_here(self, inherited: Member) -> bool:
        """Whether an inherited method is this runner's to report: not when its owner is
        a runner itself (checked there), nor when it is abstract (every concrete
        subclass overrides it, and is checked then)."""
        if runner_base(inherited.owner, self.settings.runner_bases) is not None:
            return False
        func = inherited.func
        return func is None or func.abstract_status == NOT_ABSTRACT

    # ------------------------------------------------------------------ RC207
    def check_unbound(self, base: TypeInfo) -> None:
        found = unbound_base(self.info, base)
        if found is None:
            return
        written, any_type = found
        options = self.reporter.api.options
        named = written.type.name
        if any_type.type_of_any == TypeOfAny.explicit:
            if options.disallow_any_explicit:
                return  # mypy: [explicit-any]
            how = f'binds the input type of "{base.name}" to "Any"'
        elif (unpacked := unpacked_argument(self.info, written.type)) is not None:
            # mypy says the argument is invalid ([valid-type]) and goes on with "Any"
            how = (
                f'binds the input type of "{base.name}" to "{unpacked}", which is not one '
                f'type ("{named}" is not variadic, so it is "Any")'
            )
        else:
            if options.disallow_any_generics:
                return  # mypy: [type-arg]
            how = (
                f'leaves the input type of "{base.name}" unbound ("{named}" has no type '
                'argument, so it is "Any")'
            )
        self.reporter.error(
            errors.RUNNER_INPUT_UNBOUND,
            f'Runner "{self.info.name}" {how}: nothing about its input can be checked; '
            f'write "{named}[<its input class>]"',
            self.info.defn,
        )

    # ------------------------------------------------------------------ RC201
    def check_protocol(self, t: Type) -> None:
        names: tuple[tuple[str, str, ProblemOf], ...] = (
            (self.config.as_dict_method, "method", self._as_dict_problem),
            (self.config.from_dict_method, "classmethod", self._from_dict_problem),
        )
        for item, item_info in input_classes(t):
            for name, wanted, problem_of in names:
                member = find_member(item_info, name)
                if member is None:
                    self.reporter.error(
                        errors.RUNNER_INPUT_PROTOCOL,
                        f'{self._subject(t, item)} has no {wanted} "{name}"',
                        self.info.defn,
                    )
                    continue
                problem = self._problem(member, problem_of)
                if problem is None or _mypy_reports_override(
                    item_info, member, problem, problem_of
                ):
                    continue
                self.reporter.error(
                    errors.RUNNER_INPUT_PROTOCOL,
                    f'{self._subject(t, item)}: "{member.qualname}" {problem.text}',
                    self.info.defn,
                )

    def _as_dict_problem(self, member: Member) -> Problem | None:
        if member.kind != "method":
            return Problem(f"is {_KIND_TEXT[member.kind]}, not an instance method")
        required = member.required_after_first()
        if required:
            return Problem(
                f"must take no argument besides self (it requires: {', '.join(required)})"
            )
        signature = member.signature
        if signature is not None and not is_subtype(signature.ret_type, self.mapping_type):
            return Problem(f"returns {self.reporter.fmt(signature.ret_type)}, not a dict")
        return None

    def _from_dict_problem(self, member: Member) -> Problem | None:
        if member.kind != "classmethod":
            return Problem(
                f"is {_KIND_TEXT[member.kind]}, not a classmethod",
                mypy_checks_override=member.kind != "staticmethod",
            )
        func = member.func
        if func is None:
            return None
        required = member.required_after_first()
        accepts_positional = len(func.arg_kinds) > 1 and func.arg_kinds[1] in (
            ARG_POS,
            ARG_OPT,
            ARG_STAR,
        )
        if len(required) > 1 or not accepts_positional:
            shown = ", ".join(required) if required else "none"
            return Problem(
                f"must take the tensor dict as its only required argument (it requires: {shown})"
            )
        signature = member.signature
        if signature is not None and func.arg_kinds[1] != ARG_STAR:
            taken = signature.arg_types[1]
            if not is_subtype(self.tensor_dict_type, taken):
                return Problem(
                    f"takes {self.reporter.fmt(taken)} for the tensor dict, "
                    f"which does not accept {self.reporter.fmt(self.tensor_dict_type)}"
                )
        return None

    # ------------------------------------------------------------------ RC203
    def check_returns(self, t: Type) -> None:
        for name in (self.config.prepare_input_method, self.config.make_input_method):
            member = find_member(self.info, name)
            if member is None:
                continue
            signature = checked_signature_for(self.info, member)
            if signature is None or is_subtype(signature.ret_type, t):
                continue
            returned = self.reporter.fmt(signature.ret_type)
            expected = self.reporter.fmt(t)
            if member.owner is self.info:
                base = overridden(self.info, member)
                base_signature = (
                    checked_signature_for(self.info, base) if base is not None else None
                )
                if (
                    base is not None
                    and base_signature is not None
                    and not is_subtype(signature.ret_type, base_signature.ret_type)
                    and self._override_reported(member, base)
                ):
                    continue
                self.reporter.error(
                    errors.RUNNER_INPUT_COVARIANCE,
                    f'"{member.qualname}" returns {returned}, '
                    f"which is not the runner's input type {expected}",
                    member.func or self.info.defn,
                )
            elif self._checked_here(member):
                self.reporter.error(
                    errors.RUNNER_INPUT_COVARIANCE,
                    f'Runner "{self.info.name}" inherits "{member.qualname}", which returns '
                    f"{returned}, not the runner's input type {expected}",
                    self.info.defn,
                )

    # ------------------------------------------------------------------ RC204
    def check_execute(self, t: Type) -> None:
        member = find_member(self.info, self.config.execute_method)
        signature = checked_signature_for(self.info, member) if member is not None else None
        if member is None or member.func is None or signature is None:
            return
        index = parameter_at(signature, "model_input")
        if index is None or self._takes_own_type_var(member, index):
            return
        taken = parameter_type(signature, index)
        if taken is None or is_subtype(t, taken):
            return
        shown = f"{parameter_text(signature, index)}: {self.reporter.fmt(taken)}"
        expected = self.reporter.fmt(t)
        if member.owner is self.info:
            base = overridden(self.info, member)
            if base is not None and self._override_reported(member, base):
                base_signature = checked_signature_for(self.info, base)
                base_index = (
                    parameter_at(base_signature, "model_input")
                    if base_signature is not None
                    else None
                )
                base_taken = (
                    parameter_type(base_signature, base_index)
                    if base_signature is not None and base_index is not None
                    else None
                )
                if base_taken is not None and not is_subtype(base_taken, taken):
                    return  # mypy's [override]
            self.reporter.error(
                errors.EXECUTE_INPUT_MISMATCH,
                f'"{member.qualname}" takes {shown}, '
                f"which does not accept the runner's input type {expected}",
                member.func,
            )
        elif self._checked_here(member):
            self.reporter.error(
                errors.EXECUTE_INPUT_MISMATCH,
                f'Runner "{self.info.name}" inherits "{member.qualname}", whose {shown} '
                f"does not accept the runner's input type {expected}",
                self.info.defn,
            )
