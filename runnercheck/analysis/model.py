"""The facts model: what one Python file says about the broadcast contract.

Nothing here imports or executes the code it reads. :func:`~runnercheck.analysis.extract.extract_source` turns the
text of one file into a :class:`ModuleFacts`, a plain, picklable summary (no AST nodes)
that :mod:`runnercheck.analysis.project` joins across files. ``runnercheck check`` and the
``migrate`` codemods both read these facts.

Conventions
-----------
* Lines are 1-based, columns are 1-based (``ast`` column + 1), as in findings.
* A *callee* is written as a dotted string: ``"self.prepare_input_tensors"``,
  ``"self.model_runner.execute_model"``, ``"super().as_broadcastable_tensor_dict"``,
  ``"cls.from_broadcasted_tensor_dict"``, ``"get_tp_group().broadcast_tensor_dict"``,
  ``"torch.distributed.all_reduce"``. A receiver that is not a name, attribute or call
  is written ``"?"`` (``"?.pop"``).
* Facts depend on the :class:`~runnercheck.contract.Contract` only through its
  ``driver_flag`` (branch roles) and ``broadcast_function`` (which calls are
  step-metadata broadcasts).

The API (stable)
----------------
``extract_source(source, path, contract=VLLM) -> ModuleFacts``
``extract_file(path, contract=VLLM, display_path=None) -> ModuleFacts``

:class:`ModuleFacts` (one file)
    ``path``; ``syntax_error`` (:class:`SyntaxErrorFacts` or None);
    ``classes`` (name -> :class:`ClassFacts`, module level, including under ``if``/``try``);
    ``functions`` (name -> :class:`FunctionFacts`, module-level functions, e.g. vLLM's
    ``_add_attn_metadata_broadcastable_dict``); ``driver_only_constants`` (module-level
    names bound to the driver-only marker dict); ``imports`` (local name -> dotted origin,
    ``{"dist": "torch.distributed", "broadcast_tensor_dict":
    "vllm.distributed.broadcast_tensor_dict"}``); ``suppressions`` (line -> codes, or
    None for a bare ``# runnercheck: ignore``).

:class:`ClassFacts` (one class)
    ``name``, ``path``, ``line``, ``col``, ``end_line``; ``bases`` (dotted names as
    written, subscripts removed: ``"GPUModelRunnerBase"``); ``base_args`` (type
    arguments per base: ``(("ModelInputForGPUWithSamplingMetadata",),)``);
    ``decorators``; ``is_dataclass``; ``fields`` (own dataclass-style fields,
    :class:`FieldFacts`, in order); ``methods`` (name -> :class:`FunctionFacts`);
    ``class_attrs`` (class-level assignments: name -> names referenced in the value,
    e.g. ``{"_model_input_cls": ("ModelInputForGPUWithSamplingMetadata",)}``);
    ``self_attrs`` (``self.X = ...`` in any method: X -> class names that may be
    constructed, following local variables, ``if``/``else`` and ``partial``; e.g.
    vLLM 0.5.0 ``Worker``: ``{"model_runner": ("EmbeddingModelRunner", "ModelRunner")}``);
    ``abstract_methods`` (own methods decorated ``@abstractmethod``).

:class:`FunctionFacts` (one function or method)
    ``name``, ``qualname`` (``"Class.method"`` or ``"function"``), ``path``, ``line``,
    ``col``, ``end_line``; ``params`` (positional parameter names, ``self``/``cls``
    included); ``decorators``; ``is_classmethod``/``is_staticmethod``/``is_property``/
    ``is_abstract``; ``is_stub`` (body is only a docstring, ``pass``, ``...`` or
    ``raise NotImplementedError``); ``steps`` (the control-flow skeleton, below);
    ``dicts`` (variable name -> :class:`DictFacts`); ``returns`` (names in ``dicts`` that
    the function returns; inline ``return {...}`` gets a ``"<return@LINE>"`` entry);
    ``calls`` (every callee in the body, in order, as :class:`CallSite`).

Steps: the control-flow skeleton of a function body
    A tuple of :class:`CallStep` (a call to ``self.*``/``cls.*``/``super().*``/
    ``self.attr.*``, or a collective; ``collective`` names the collective,
    ``step_broadcast`` is True for the contract's ``broadcast_function``),
    :class:`BranchStep` (``then_role``/``else_role``: ``"driver"``, ``"non-driver"`` or
    None when the condition tests the driver flag, e.g. ``if self.is_driver_worker``),
    :class:`LoopStep`, :class:`TryStep`, :class:`ExitStep` (``"return"``/``"raise"``) and
    :class:`RoleAssertStep` (``assert not self.is_driver_worker``), :class:`AssertStep`
    (any other ``assert`` that names a value) and :class:`BindStep` (what a local name
    holds, for the collective schedule). Walking it with a
    role gives the broadcasts on the driver and non-driver path
    (:meth:`runnercheck.analysis.project.Project.broadcasts_per_step`).

:class:`DictFacts` (one dict-valued variable of a function)
    ``keys`` (literal key -> :class:`KeyFacts`: where it is set, which ``self`` fields and
    parameters its value reads, ``bad_value`` when the value cannot be pickled);
    ``dynamic`` (keys not known statically were added: ``update(x)``, ``**x``);
    ``all_fields`` (built from ``asdict(self)``/``vars(self)``/``self.__dict__``);
    ``sources`` (callees whose returned dict flows in, e.g.
    ``"super().as_broadcastable_tensor_dict"``); ``merges`` (other variables merged in);
    ``helpers`` (:class:`HelperCall`: calls that receive the dict as an argument, such as
    ``_add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)`` or
    ``broadcast_tensor_dict(data, src=0)``); ``pops`` (literal keys popped/deleted ->
    line); ``dynamic_pop``; ``reads``; ``required`` (keys read with no default nor
    guard -> position); ``constructs`` (:class:`ConstructFacts`:
    ``cls(**tensor_dict)``/``Name(**tensor_dict)``); ``param_index`` (when a parameter);
    ``flow_params`` (parameters whose value flows into the dict).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

from runnercheck.analysis.conditions import Condition, Guard, Role, Test

if TYPE_CHECKING:
    from runnercheck.analysis.requests import RequestUses
    from runnercheck.analysis.shapes import SplitShape

__all__ = ["Condition", "Guard", "Role", "Test"]


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class SyntaxErrorFacts:
    line: int
    col: int
    message: str


@dataclass(frozen=True)
class CallSite:
    """A call in a function body."""

    line: int
    col: int
    callee: str
    #: Number of positional arguments and names of keyword arguments.
    nargs: int = 0
    keywords: tuple[str, ...] = ()
    #: The call passes ``**mapping``: its keywords are not all known.
    star_kwargs: bool = False
    #: The call sits in a nested function or lambda of the body (it runs later, if ever).
    nested: bool = False
    #: The ``if`` conditions around the call that test names against literals.
    conditions: tuple[Condition, ...] = ()
    #: The ranks that run the call, from the driver flag (a branch on it, or what
    #: follows ``if not self.is_driver_worker: return``); None: every rank.
    role: Role | None = None
    #: Each positional argument's text, and ``(keyword, text)``, as :attr:`CallStep.args`.
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CallStep:
    line: int
    col: int
    callee: str
    #: The collective's name as called (``"broadcast_tensor_dict"``), or None.
    collective: str | None = None
    #: True for the contract's broadcast function: one step-metadata broadcast.
    step_broadcast: bool = False
    #: A broadcast that sends (a positional dict or ``tensor_dict=``), not only receives.
    sends: bool = False
    #: A send of an empty dict literal: the stop signal of a worker loop.
    sends_empty: bool = False
    #: For a ``self``/``cls``/``super()`` call: each positional argument's text when it is
    #: a name, arithmetic (``"(count - 1)"``) or a literal (``"False"``, ``"None"``,
    #: ``"3"``, ``"'x'"``), else ``""``; and ``(keyword, text)``.
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()
    #: For a collective: its ``src`` and group as written (the group is a ``group=``
    #: argument or the object it is called on: ``"get_tp_group()"``), "" when not given;
    #: the payload as written (``"broadcast_dict"``), and the keys of a literal payload
    #: with each value as written (``(("no_spec", "no_spec"),)``; None: not a literal).
    src: str = ""
    group: str = ""
    payload: str = ""
    carries: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class BranchStep:
    line: int
    then_role: Role | None
    else_role: Role | None
    body: tuple[Step, ...]
    orelse: tuple[Step, ...]
    #: The test's conjuncts that compare a name with a literal (see :class:`Guard`),
    #: and whether they are the whole test.
    guards: tuple[Guard, ...] = ()
    complete: bool = False
    #: The whole test as a formula (what decides it: the role, a received value, local
    #: state); None for the cases of a ``match``.
    test: Test | None = None


@dataclass(frozen=True)
class LoopStep:
    line: int
    body: tuple[Step, ...]
    orelse: tuple[Step, ...] = ()
    #: ``for ... in range(N)``: the text of ``N`` (how many times the body runs).
    count: str | None = None
    #: The loop variable and the literal it holds on the first pass (``for i in
    #: range(n)``: ``("i", "0")``), when the iterable tells it.
    first: tuple[str, str] | None = None
    #: The last line of the loop statement.
    end_line: int = 0


@dataclass(frozen=True)
class TryStep:
    line: int
    body: tuple[Step, ...]
    handlers: tuple[tuple[Step, ...], ...]
    orelse: tuple[Step, ...]
    finalbody: tuple[Step, ...]


@dataclass(frozen=True)
class ExitStep:
    line: int
    kind: Literal["return", "raise"]


@dataclass(frozen=True)
class RoleAssertStep:
    line: int
    role: Role


@dataclass(frozen=True)
class AssertStep:
    """``assert <test>`` that names something (not only the driver flag, which is a
    :class:`RoleAssertStep`): what follows runs only where the test holds."""

    line: int
    test: Test


@dataclass(frozen=True)
class BindStep:
    """``name = <value>``: what a local name holds from here on, as the collective
    schedule follows it. ``value`` is a subject as written (``"data['no_spec']"``,
    ``"execute_model_req.num_lookahead_slots"``, ``"other"``), ``"=<repr>"`` for a
    literal, ``"@LINE:COL"`` for the result of the call there (``"@LINE:COL['k']"``: a
    key of it), ``"{}"`` for a literal dict (its keys and their values as written in
    ``keys``), or "" for anything else."""

    line: int
    name: str
    value: str = ""
    keys: tuple[tuple[str, str], ...] = ()
    #: A truth value computed in place (``no_spec = k == 0 or disable``): its formula.
    test: Test | None = None


Step: TypeAlias = (
    CallStep | BranchStep | LoopStep | TryStep | ExitStep | RoleAssertStep | AssertStep | BindStep
)


@dataclass(frozen=True)
class KeyFacts:
    """A literal key put into a dict."""

    key: str
    path: str
    line: int
    col: int
    #: ``self`` attributes read by the value (``self.input_tokens`` -> ``"input_tokens"``).
    fields: tuple[str, ...] = ()
    #: Indices of the function's parameters read by the value.
    params: tuple[int, ...] = ()
    #: Why the value cannot be pickled or broadcast (``"a lambda"``), or None.
    bad_value: str | None = None


@dataclass(frozen=True)
class ReadFacts:
    """Where a dict's key is read."""

    line: int
    col: int


@dataclass(frozen=True)
class HelperCall:
    """A call that receives a dict variable as a positional argument."""

    callee: str
    line: int
    col: int
    #: Position of the dict among the positional arguments.
    arg_index: int
    #: Per positional argument: the ``self`` fields it reads.
    arg_fields: tuple[tuple[str, ...], ...]
    #: Per positional argument: the function parameters it reads.
    arg_params: tuple[tuple[int, ...], ...]
    #: Per positional argument: its dotted name (``"ModelInputForGPU"``), or "".
    arg_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConstructFacts:
    """``target(**dict)``: the receiving constructor (``"cls"`` or a class name)."""

    target: str
    line: int
    col: int


@dataclass(frozen=True)
class ConstructionFacts:
    """A call that may construct a class (``Name(...)``, ``mod.Name(...)``, ``cls(...)``),
    with the class names each argument may hold (from the annotations of the function's
    parameters and the classes its local variables are assigned)."""

    callee: str
    line: int
    #: Per positional argument: class names it may hold.
    args: tuple[tuple[str, ...], ...]
    #: ``(keyword, class names)`` per keyword argument.
    kwargs: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass
class DictFacts:
    name: str
    param_index: int | None = None
    keys: dict[str, KeyFacts] = field(default_factory=dict)
    dynamic: bool = False
    all_fields: bool = False
    sources: list[str] = field(default_factory=list)
    merges: list[str] = field(default_factory=list)
    helpers: list[HelperCall] = field(default_factory=list)
    pops: dict[str, int] = field(default_factory=dict)
    dynamic_pop: bool = False
    reads: set[str] = field(default_factory=set)
    #: Literal keys read with no default and no guard (``d[k]``, ``d.pop(k)``, ``del
    #: d[k]``; not under ``if k in d``, a ``try`` or after ``if k not in d: return``):
    #: key -> where the first such read is. A missing key raises KeyError.
    required: dict[str, ReadFacts] = field(default_factory=dict)
    constructs: list[ConstructFacts] = field(default_factory=list)
    #: Parameters whose values flow into the dict (keys' values or dynamic updates).
    flow_params: set[int] = field(default_factory=set)
    #: ``self`` fields whose values flow in through dynamic updates.
    dynamic_fields: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class FieldFacts:
    name: str
    line: int
    col: int
    annotation: str
    has_default: bool
    driver_only: bool
    #: False for ``field(init=False)``: not accepted by ``cls(**d)``.
    init: bool = True
    #: ``metadata=NAME``: the name of a constant that may hold the driver-only marker
    #: (resolved by :meth:`runnercheck.analysis.project.Project.is_driver_only`).
    metadata_ref: str | None = None
    #: The default's ``repr`` when it is a literal (``perform_sampling: bool = True``).
    default: str | None = None


@dataclass(frozen=True)
class LiteralDictFacts:
    """A function whose body is ``d = {...}; <statements>; return d`` (after an optional
    docstring), as compared by the ``super-dict`` codemod and RC104."""

    #: The dict variable.
    var: str
    #: ``(key, ast.dump of its value)`` in order; None when a key is not a literal string.
    items: tuple[tuple[str, str], ...] | None
    #: ``ast.dump`` of each statement between the literal and the return, the dict
    #: variable renamed to ``_``.
    mutations: tuple[str, ...]


@dataclass
class FunctionFacts:
    name: str
    qualname: str
    path: str
    line: int
    col: int
    end_line: int
    params: tuple[str, ...] = ()
    decorators: tuple[str, ...] = ()
    is_classmethod: bool = False
    is_staticmethod: bool = False
    is_property: bool = False
    is_abstract: bool = False
    is_stub: bool = False
    steps: tuple[Step, ...] = ()
    dicts: dict[str, DictFacts] = field(default_factory=dict)
    returns: tuple[str, ...] = ()
    calls: tuple[CallSite, ...] = ()
    #: The return annotation as written (a string annotation without its quotes).
    return_annotation: str | None = None
    #: Attributes read on each parameter where a non-driver rank may run
    #: (``model_input.input_tokens`` -> ``{"model_input": ("input_tokens",)}``), in
    #: evaluation order; reads only the driver reaches are left out.
    param_attrs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Per ``param.attr`` read where a non-driver rank may run: the ``self`` attributes
    #: that every such read requires to be set (``if self.lora_config:`` around it).
    param_attr_guards: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Attributes of each parameter whose being set makes the body raise at its top
    #: level (``if enc_dec_mr.lora_config is not None: raise ...``).
    refuses: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Attributes of each parameter the body assigns or mutates in place
    #: (``model_input.cached_outputs.append(...)``, ``model_input.x = ...``).
    param_writes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``name = callee(...)`` assignments of the body: local name -> the last callee.
    assigned_calls: dict[str, str] = field(default_factory=dict)
    #: ``repr`` of the constant when the body (after a docstring) is only ``return CONST``.
    constant_return: str | None = None
    #: The literal-dict shape of the body (read for the contract's dict method only).
    literal_dict: LiteralDictFacts | None = None
    #: A method that broadcasts under a driver split: what runs after the split, which
    #: values travel, the extra broadcasts (what ``migrate`` plans from).
    split: SplitShape | None = None
    #: The contract's execute method: every read of its request parameter.
    request_reads: RequestUses | None = None
    #: The contract's execute method: names it reads on a path the other ranks take,
    #: with the first line of each.
    non_driver_names: dict[str, int] = field(default_factory=dict)
    #: The contract's execute method: the annotation of each positional parameter
    #: after ``self`` as written ("" when none).
    param_annotations: tuple[str, ...] = ()
    #: Names in each annotated parameter's annotation (``worker: Optional["Worker"]`` ->
    #: ``{"worker": ("Optional", "Worker")}``), keyword-only parameters included.
    param_types: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Calls that may construct a class with arguments of known classes.
    constructions: tuple[ConstructionFacts, ...] = ()
    #: Literal defaults of parameters (keyword-only included): name -> ``repr``.
    param_defaults: dict[str, str] = field(default_factory=dict)
    #: ``self.X = <literal>`` anywhere in the body: X -> the literal's ``repr`` (``"?"``
    #: when the body also assigns X something else).
    self_constants: dict[str, str] = field(default_factory=dict)


@dataclass
class ClassFacts:
    name: str
    path: str
    line: int
    col: int
    end_line: int
    bases: tuple[str, ...] = ()
    base_args: tuple[tuple[str, ...], ...] = ()
    decorators: tuple[str, ...] = ()
    is_dataclass: bool = False
    fields: tuple[FieldFacts, ...] = ()
    methods: dict[str, FunctionFacts] = field(default_factory=dict)
    class_attrs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    self_attrs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    abstract_methods: tuple[str, ...] = ()
    #: Names the class body annotates without a value in a non-dataclass
    #: (``model_runner: ModelRunnerBase``): name -> names in the annotation.
    annotations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: A NamedTuple's ``name: <annotation>`` statements as written, in order (its
    #: field types); empty for other classes.
    annotation_texts: dict[str, str] = field(default_factory=dict)
    #: Class-level ``name = <literal>`` (``do_metadata_broadcast = False``): name ->
    #: the literal's ``repr``.
    class_constants: dict[str, str] = field(default_factory=dict)


@dataclass
class ModuleFacts:
    path: str
    syntax_error: SyntaxErrorFacts | None = None
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    functions: dict[str, FunctionFacts] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)
    suppressions: dict[int, frozenset[str] | None] = field(default_factory=dict)
    #: Module-level constants holding the driver-only marker
    #: (``DRIVER_ONLY = {"runnercheck": "driver-only"}``).
    driver_only_constants: frozenset[str] = frozenset()
    #: Module-level imports as written: local name -> (module, imported name or None for
    #: ``import x``, relative level).
    import_sources: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)
    #: Names bound at the top level (classes, functions, assignments, imports).
    top_level_names: frozenset[str] = frozenset()
    #: Module-level ``T = TypeVar(...)`` names.
    typevars: frozenset[str] = frozenset()
    #: Every name loaded anywhere in the module; read only when asked for
    #: (``extract_tree(..., names=True)``), else None.
    loaded_names: frozenset[str] | None = None
    #: Whether the shapes ``migrate`` plans from (``FunctionFacts.split``, the execute
    #: method's request reads) were read (``extract_tree(..., names=True)``,
    #: ``read_shapes``); when not, they stand at their defaults.
    shapes_read: bool = False


def calls_with_side(
    steps: tuple[Step, ...], non_driver: bool = False
) -> list[tuple[CallStep, bool]]:
    """Every call of ``steps`` in order, with whether it sits under a branch only the
    non-driver ranks take."""
    out: list[tuple[CallStep, bool]] = []
    for step in steps:
        if isinstance(step, CallStep):
            out.append((step, non_driver))
        elif isinstance(step, BranchStep):
            out += calls_with_side(step.body, non_driver or step.then_role == "non-driver")
            out += calls_with_side(step.orelse, non_driver or step.else_role == "non-driver")
        elif isinstance(step, LoopStep):
            out += calls_with_side(step.body, non_driver)
            out += calls_with_side(step.orelse, non_driver)
        elif isinstance(step, TryStep):
            for block in (step.body, *step.handlers, step.orelse, step.finalbody):
                out += calls_with_side(block, non_driver)
    return out


def flatten_calls(steps: tuple[Step, ...]) -> list[CallStep]:
    return [call for call, _ in calls_with_side(steps)]
