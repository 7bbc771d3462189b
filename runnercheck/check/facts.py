"""Source facts: what one Python file says about the broadcast contract, read with ``ast``.

Nothing here imports or executes the code it reads. :func:`extract_source` turns the
text of one file into a :class:`ModuleFacts`, a plain, picklable summary (no AST nodes)
that :mod:`runnercheck.check.project` joins across files. ``runnercheck check`` and the
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
    :class:`RoleAssertStep` (``assert not self.is_driver_worker``). Walking it with a
    role gives the broadcasts on the driver and non-driver path
    (:meth:`runnercheck.check.project.Project.broadcasts_per_step`).

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
    line); ``dynamic_pop``; ``reads``; ``constructs`` (:class:`ConstructFacts`:
    ``cls(**tensor_dict)``/``Name(**tensor_dict)``); ``param_index`` (when a parameter);
    ``flow_params`` (parameters whose value flows into the dict).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

from runnercheck.contract import (
    DRIVER_ONLY_METADATA_KEY,
    DRIVER_ONLY_METADATA_VALUE,
    VLLM,
    Contract,
)
from runnercheck.deep import parse_failure

Role = Literal["driver", "non-driver"]

#: ``torch.distributed`` (and group-communicator) operations that are collectives.
COLLECTIVE_NAMES = frozenset(
    {
        "broadcast",
        "broadcast_object",
        "broadcast_object_list",
        "broadcast_tensor_dict",
        "all_reduce",
        "all_gather",
        "all_gather_object",
        "all_gather_into_tensor",
        "all_to_all",
        "all_to_all_single",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "barrier",
        "monitored_barrier",
    }
)
#: Free functions named like vLLM's ``tensor_model_parallel_all_reduce``.
_PARALLEL_HELPER = re.compile(
    r"^(tensor|pipeline|model|sequence|data|expert)_(model_)?parallel_"
    r"(all_reduce|all_gather|gather|broadcast|reduce_scatter|all_to_all|barrier)\w*$"
)
#: Modules whose functions of a collective name are collectives.
_DISTRIBUTED_ORIGINS = ("torch.distributed", "distributed", "xla_model", "parallel_state")

_SUPPRESS = re.compile(r"#\s*runnercheck:\s*ignore(?:\[([^\]]*)\])?", re.IGNORECASE)

_STREAM_NAMES = frozenset({"Stream", "current_stream", "default_stream", "Event", "ExternalStream"})
_DEVICE_MODULES = ("cuda", "xpu", "npu", "mps", "accelerator")

_DICT_ANNOTATION = re.compile(r"\b(Dict|dict|Mapping|MutableMapping)\b")

_LOCK_NAMES = frozenset(
    {"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event", "Barrier"}
)


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


@dataclass(frozen=True)
class CallStep:
    line: int
    col: int
    callee: str
    #: The collective's name as called (``"broadcast_tensor_dict"``), or None.
    collective: str | None = None
    #: True for the contract's broadcast function: one step-metadata broadcast.
    step_broadcast: bool = False


@dataclass(frozen=True)
class BranchStep:
    line: int
    then_role: Role | None
    else_role: Role | None
    body: tuple[Step, ...]
    orelse: tuple[Step, ...]


@dataclass(frozen=True)
class LoopStep:
    line: int
    body: tuple[Step, ...]
    orelse: tuple[Step, ...] = ()


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


Step: TypeAlias = CallStep | BranchStep | LoopStep | TryStep | ExitStep | RoleAssertStep


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


@dataclass(frozen=True)
class ConstructFacts:
    """``target(**dict)``: the receiving constructor (``"cls"`` or a class name)."""

    target: str
    line: int
    col: int


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
    #: (resolved by :meth:`runnercheck.check.project.Project.is_driver_only`).
    metadata_ref: str | None = None


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


# ------------------------------------------------------------------ helpers


_DOTTED = "_runnercheck_dotted"


def dotted(node: ast.expr) -> str:
    """``self.model_runner.execute_model`` -> that string; calls become ``name()``.

    Iterative, and remembered on each node of the chain (the trees are only read), so
    that a chain of N calls costs N steps, not N * N / 2."""
    chain: list[ast.expr] = []
    current: ast.expr = node
    while True:
        known = getattr(current, _DOTTED, None)
        if known is not None:
            text = known
            break
        if isinstance(current, ast.Name):
            text = current.id
            break
        if isinstance(current, (ast.Attribute, ast.Subscript)):
            chain.append(current)
            current = current.value
        elif isinstance(current, ast.Call):
            chain.append(current)
            current = current.func
        else:
            text = "?"
            break
    for item in reversed(chain):
        if isinstance(item, ast.Attribute):
            text = f"{text}.{item.attr}"
        elif isinstance(item, ast.Call):
            text = f"{text}()"
        setattr(item, _DOTTED, text)
    return text


def last_name(callee: str) -> str:
    return callee.rsplit(".", 1)[-1]


def receiver(callee: str) -> str:
    return callee.rsplit(".", 1)[0] if "." in callee else ""


def _col(node: ast.AST) -> int:
    return int(getattr(node, "col_offset", 0)) + 1


def _line(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def _str_const(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _self_fields(node: ast.AST, self_name: str | None) -> tuple[str, ...]:
    """``self`` attributes read anywhere in ``node`` (first attribute only)."""
    if self_name is None:
        return ()
    found: list[str] = []
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == self_name
            and sub.attr not in found
        ):
            found.append(sub.attr)
    return tuple(found)


def _params_read(node: ast.AST, params: dict[str, int]) -> tuple[int, ...]:
    found: list[int] = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in params and params[sub.id] not in found:
            found.append(params[sub.id])
    return tuple(sorted(found))


def _names_in(node: ast.AST) -> tuple[str, ...]:
    names: list[str] = []
    for sub in ast.walk(node):
        name = None
        if isinstance(sub, ast.Name):
            name = sub.id
        elif isinstance(sub, ast.Attribute):
            name = sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            # string annotations: "ModelRunnerBase"
            name = sub.value.strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


def _decorator_names(decorators: list[ast.expr]) -> tuple[str, ...]:
    out = []
    for dec in decorators:
        target = dec.func if isinstance(dec, ast.Call) else dec
        out.append(dotted(target))
    return tuple(out)


def _is_stub(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring or ``...``
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if last_name(dotted(exc)) == "NotImplementedError":
                continue
        return False
    return True


# ----------------------------------------------------------- value checks


def bad_value(node: ast.expr, self_name: str | None, imports: dict[str, str]) -> str | None:
    """Why a value syntactically cannot be pickled or broadcast, or None."""
    if isinstance(node, ast.Lambda):
        return "a lambda"
    if isinstance(node, ast.GeneratorExp):
        return "a generator"
    if isinstance(node, ast.Call):
        callee = dotted(node.func)
        name = last_name(callee)
        recv = receiver(callee)
        origin = imports.get(callee.split(".", 1)[0], "")
        full = origin + callee[len(callee.split(".", 1)[0]) :] if origin else callee
        if name in _LOCK_NAMES and ("threading" in full or "multiprocessing" in full):
            return f"a {full} object"
        if name == "open" and recv in ("", "io", "builtins"):
            return "an open file"
        if name in _STREAM_NAMES and (
            any(f".{device}." in f".{full}." for device in _DEVICE_MODULES)
            or (full.startswith("torch.") and name != "Event")
        ):
            return f"a device stream or event ({callee}())"
        parts = full.split(".")
        if len(parts) >= 2 and parts[-2] == "nn" and name[:1].isupper():
            return f"an nn.Module ({callee}(...))"
        return None
    if (
        self_name is not None
        and isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == self_name
        and node.attr == "model"
    ):
        return f"an nn.Module ({self_name}.model)"
    return None


def classify_collective(callee: str, imports: dict[str, str], contract: Contract) -> str | None:
    """The collective's name if ``callee`` is a collective, else None."""
    name = last_name(callee)
    if name == contract.broadcast_function:
        return name
    recv = receiver(callee)
    if not recv:
        if _PARALLEL_HELPER.match(name):
            return name
        if name in COLLECTIVE_NAMES:
            origin = imports.get(name, "")
            if any(part in origin for part in _DISTRIBUTED_ORIGINS):
                return name
        return None
    if name not in COLLECTIVE_NAMES and not _PARALLEL_HELPER.match(name):
        return None
    head = recv.split(".", 1)[0]
    origin = imports.get(head, head)
    full_recv = origin + recv[len(head) :]
    if any(part in full_recv for part in _DISTRIBUTED_ORIGINS):
        return name
    if "group" in recv.lower() or "comm" in last_name(recv).lower():
        return name
    return None


# ---------------------------------------------------------------- roles


def _role_of(test: ast.expr, flag: str) -> tuple[Role | None, Role | None]:
    """(role when the test is true, role when it is false)."""
    if (isinstance(test, ast.Attribute) and test.attr == flag) or (
        isinstance(test, ast.Name) and test.id == flag
    ):
        return "driver", "non-driver"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        then_role, else_role = _role_of(test.operand, flag)
        return else_role, then_role
    if isinstance(test, ast.BoolOp):
        roles = [_role_of(value, flag) for value in test.values]
        if isinstance(test.op, ast.And):
            then = next((r[0] for r in roles if r[0] is not None), None)
            return then, None
        orelse = next((r[1] for r in roles if r[1] is not None), None)
        return None, orelse
    return None, None


# ------------------------------------------------------------ extraction


class _FunctionReader:
    """Builds the :class:`FunctionFacts` of one function."""

    def __init__(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        qualname: str,
        path: str,
        imports: dict[str, str],
        contract: Contract,
        in_class: bool,
    ) -> None:
        self.node = node
        self.path = path
        self.imports = imports
        self.contract = contract
        args = node.args
        positional_args = [*args.posonlyargs, *args.args]
        positional = [a.arg for a in positional_args]
        self.params = {name: i for i, name in enumerate(positional)}
        self.dict_params = {
            a.arg
            for a in positional_args
            if "dict" in a.arg.lower()
            or (a.annotation is not None and _DICT_ANNOTATION.search(ast.unparse(a.annotation)))
        }
        decorators = _decorator_names(node.decorator_list)
        last = {last_name(d) for d in decorators}
        self.facts = FunctionFacts(
            name=node.name,
            qualname=qualname,
            path=path,
            line=node.lineno,
            col=node.col_offset + 1,
            end_line=node.end_lineno or node.lineno,
            params=tuple(positional),
            decorators=decorators,
            is_classmethod="classmethod" in last,
            is_staticmethod="staticmethod" in last,
            is_property="property" in last or "cached_property" in last,
            is_abstract="abstractmethod" in last
            or "abstractproperty" in last
            or "abstractclassmethod" in last,
            is_stub=_is_stub(node.body),
        )
        self.self_name: str | None = None
        if in_class and positional and not self.facts.is_staticmethod:
            if not self.facts.is_classmethod:
                self.self_name = positional[0]
            # ``self``/``cls`` is not a parameter whose value flows anywhere
            self.params.pop(positional[0], None)
        self.bad_locals: dict[str, str] = {}
        self.calls: list[CallSite] = []
        self.noted: set[int] = set()
        self.nodes: list[ast.AST] = []

    # -- dict facts ---------------------------------------------------
    def _dict(self, name: str) -> DictFacts:
        facts = self.facts.dicts.get(name)
        if facts is None:
            facts = DictFacts(name=name, param_index=self.params.get(name))
            self.facts.dicts[name] = facts
        return facts

    def _key(self, key: str, key_node: ast.AST, value: ast.expr) -> KeyFacts:
        bad = bad_value(value, self.self_name, self.imports)
        if bad is None and isinstance(value, ast.Name):
            bad = self.bad_locals.get(value.id)
        return KeyFacts(
            key=key,
            path=self.path,
            line=_line(key_node),
            col=_col(key_node),
            fields=_self_fields(value, self.self_name),
            params=_params_read(value, self.params),
            bad_value=bad,
        )

    def _is_all_fields(self, node: ast.expr) -> bool:
        if self.self_name is None:
            return False
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = last_name(dotted(sub.func))
                if (
                    name in ("asdict", "vars", "fields", "getattr", "astuple")
                    and sub.args
                    and isinstance(sub.args[0], ast.Name)
                    and sub.args[0].id == self.self_name
                ):
                    return True
            if (
                isinstance(sub, ast.Attribute)
                and sub.attr == "__dict__"
                and isinstance(sub.value, ast.Name)
                and sub.value.id == self.self_name
            ):
                return True
        return False

    def _add_value(self, facts: DictFacts, value: ast.expr) -> None:
        """Merge a dict-valued expression into ``facts``."""
        if isinstance(value, ast.Dict):
            for key_node, item in zip(value.keys, value.values, strict=True):
                if key_node is None:  # ``**other``
                    self._add_value(facts, item)
                    continue
                key = _str_const(key_node)
                if key is None:
                    facts.dynamic = True
                    facts.flow_params.update(_params_read(item, self.params))
                    facts.dynamic_fields.update(_self_fields(item, self.self_name))
                    continue
                kf = self._key(key, key_node, item)
                facts.keys[key] = kf
                facts.flow_params.update(kf.params)
            return
        if isinstance(value, ast.Name):
            if value.id in self.params:
                facts.flow_params.add(self.params[value.id])
            if value.id != facts.name:
                facts.merges.append(value.id)
            return
        if isinstance(value, ast.Call):
            callee = dotted(value.func)
            if callee == "dict":
                for arg in value.args:
                    self._add_value(facts, arg)
                for kw in value.keywords:
                    if kw.arg is None:
                        self._add_value(facts, kw.value)
                    else:
                        kf = self._key(kw.arg, kw, kw.value)
                        facts.keys[kw.arg] = kf
                        facts.flow_params.update(kf.params)
                return
            if self._is_all_fields(value):
                facts.all_fields = True
                return
            facts.sources.append(callee)
            facts.dynamic_fields.update(_self_fields(value, self.self_name))
            facts.flow_params.update(_params_read(value, self.params))
            return
        if isinstance(value, ast.DictComp):
            if self._is_all_fields(value):
                facts.all_fields = True
                return
            facts.dynamic = True
            facts.flow_params.update(_params_read(value, self.params))
            facts.dynamic_fields.update(_self_fields(value, self.self_name))
            return
        if self._is_all_fields(value):
            facts.all_fields = True
            return
        facts.dynamic = True
        facts.flow_params.update(_params_read(value, self.params))
        facts.dynamic_fields.update(_self_fields(value, self.self_name))

    @staticmethod
    def _dictish(value: ast.expr) -> bool:
        if isinstance(value, (ast.Dict, ast.DictComp)):
            return True
        if isinstance(value, ast.Call):
            callee = dotted(value.func)
            name = last_name(callee)
            return (
                callee == "dict"
                or "dict" in name
                or name in ("asdict", "vars", "copy")
                or name.startswith("as_")
            )
        return False

    def _read_assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            bad = bad_value(value, self.self_name, self.imports)
            if bad is not None:
                self.bad_locals[target.id] = bad
            if self._dictish(value) or target.id in self.facts.dicts:
                facts = self._dict(target.id)
                if isinstance(value, ast.Call):
                    # ``d = helper(backend, d)``: the helper is applied to ``d``.
                    self._note_call(value)
                    self.noted.add(id(value))
                    if any(isinstance(a, ast.Name) and a.id == target.id for a in value.args):
                        return
                self._add_value(facts, value)
            return
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            facts = self._dict(target.value.id)
            key = _str_const(target.slice)
            if key is None:
                facts.dynamic = True
                facts.flow_params.update(_params_read(value, self.params))
                facts.dynamic_fields.update(_self_fields(value, self.self_name))
            else:
                kf = self._key(key, target.slice, value)
                facts.keys[key] = kf
                facts.flow_params.update(kf.params)

    def _note_call(self, call: ast.Call) -> None:
        """Dict operations expressed as calls: update/pop/get/setdefault, helpers, ``f(**d)``."""
        callee = dotted(call.func)
        name = last_name(callee)
        recv_node = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(recv_node, ast.Name) and name in (
            "update",
            "pop",
            "get",
            "setdefault",
            "__setitem__",
        ):
            facts = self._dict(recv_node.id)
            if name == "update":
                for arg in call.args:
                    self._add_value(facts, arg)
                for kw in call.keywords:
                    if kw.arg is None:
                        self._add_value(facts, kw.value)
                    else:
                        kf = self._key(kw.arg, kw, kw.value)
                        facts.keys[kw.arg] = kf
                        facts.flow_params.update(kf.params)
            elif name == "setdefault" and call.args:
                key = _str_const(call.args[0])
                if key is None:
                    facts.dynamic = True
                elif len(call.args) > 1:
                    facts.keys.setdefault(key, self._key(key, call.args[0], call.args[1]))
            elif name == "pop" and call.args:
                key = _str_const(call.args[0])
                if key is None:
                    facts.dynamic_pop = True
                else:
                    facts.pops.setdefault(key, call.lineno)
            elif name == "get" and call.args:
                key = _str_const(call.args[0])
                if key is not None:
                    facts.reads.add(key)
        # ``target(**d)``
        for kw in call.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Name):
                self._dict(kw.value.id).constructs.append(
                    ConstructFacts(target=callee, line=call.lineno, col=call.col_offset + 1)
                )
        # a dict passed as a positional argument to a helper (or to the broadcast)
        reads: list[tuple[tuple[str, ...], tuple[int, ...]]] = []

        def helper_call(index: int) -> HelperCall:
            if not reads:  # computed once, only for calls that receive a dict
                reads.extend(
                    (_self_fields(a, self.self_name), _params_read(a, self.params))
                    for a in call.args
                )
            return HelperCall(
                callee,
                call.lineno,
                call.col_offset + 1,
                index,
                tuple(r[0] for r in reads),
                tuple(r[1] for r in reads),
            )

        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and (
                arg.id in self.facts.dicts or arg.id in self.dict_params or "dict" in arg.id
            ):
                if name in ("update", "pop", "get", "len", "isinstance", "bool", "list"):
                    continue
                self._dict(arg.id).helpers.append(helper_call(index))
            elif isinstance(arg, ast.Dict) and name == self.contract.broadcast_function:
                pseudo = self._dict(f"<arg@{call.lineno}:{call.col_offset + 1}>")
                self._add_value(pseudo, arg)
                pseudo.helpers.append(helper_call(index))

    def _read_dicts(self) -> None:
        returns: list[str] = []
        for node in self.nodes:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                _imports(node, self.imports)  # lazy imports count for callee resolution
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._read_assign(target, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._read_assign(node.target, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                if node.target.id in self.facts.dicts and isinstance(node.op, ast.BitOr):
                    self._add_value(self._dict(node.target.id), node.value)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        key = _str_const(target.slice)
                        facts = self._dict(target.value.id)
                        if key is None:
                            facts.dynamic_pop = True
                        else:
                            facts.pops.setdefault(key, node.lineno)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                if isinstance(node.value, ast.Name) and node.value.id in self.facts.dicts:
                    key = _str_const(node.slice)
                    if key is not None:
                        self.facts.dicts[node.value.id].reads.add(key)
            elif isinstance(node, ast.Call):
                self.calls.append(
                    CallSite(
                        line=node.lineno,
                        col=node.col_offset + 1,
                        callee=dotted(node.func),
                        nargs=len(node.args),
                        keywords=tuple(kw.arg for kw in node.keywords if kw.arg),
                    )
                )
                if id(node) not in self.noted:
                    self._note_call(node)
            elif isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Name):
                    returns.append(value.id)
                    self._dict(value.id)
                elif isinstance(value, (ast.Dict, ast.DictComp)) or (
                    isinstance(value, ast.Call) and dotted(value.func) == "dict"
                ):
                    pseudo = f"<return@{node.lineno}>"
                    self._add_value(self._dict(pseudo), value)
                    returns.append(pseudo)
                elif isinstance(value, ast.Call) and self._dictish(value):
                    pseudo = f"<return@{node.lineno}>"
                    self._add_value(self._dict(pseudo), value)
                    returns.append(pseudo)
        self.facts.returns = tuple(dict.fromkeys(returns))
        self.facts.calls = tuple(self.calls)

    # -- steps ----------------------------------------------------------
    def _call_steps(self, node: ast.AST, out: list[Step]) -> None:
        """Calls in ``node`` in evaluation order (arguments before the call); every node
        visited is also recorded, parents first, in ``self.nodes``."""
        kind = type(node)
        if kind in _LEAVES:
            return
        if kind is ast.Attribute:
            self._call_steps(node.value, out)  # type: ignore[attr-defined]
            return
        if kind in _RECORDED:
            self.nodes.append(node)
        if kind in _NOT_EXECUTED:
            return
        if kind is ast.Call:
            assert isinstance(node, ast.Call)
            self._call_steps(node.func, out)
            for arg in node.args:
                self._call_steps(arg, out)
            for kw in node.keywords:
                self._call_steps(kw.value, out)
            callee = dotted(node.func)
            collective = classify_collective(callee, self.imports, self.contract)
            head = callee.split(".", 1)[0]
            if (
                collective is not None
                or head in ("self", "cls", "super()")
                or (self.self_name is not None and head == self.self_name)
            ):
                if self.self_name is not None and head == self.self_name and head != "self":
                    callee = "self" + callee[len(head) :]
                out.append(
                    CallStep(
                        line=node.lineno,
                        col=node.col_offset + 1,
                        callee=callee,
                        collective=collective,
                        step_broadcast=collective == self.contract.broadcast_function,
                    )
                )
            return
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self._call_steps(item, out)
            elif isinstance(value, ast.AST):
                self._call_steps(value, out)

    def _steps(self, body: list[ast.stmt]) -> tuple[Step, ...]:
        out: list[Step] = []
        flag = self.contract.driver_flag
        for stmt in body:
            if isinstance(stmt, ast.If):
                self._call_steps(stmt.test, out)
                then_role, else_role = _role_of(stmt.test, flag)
                out.append(
                    BranchStep(
                        stmt.lineno,
                        then_role,
                        else_role,
                        self._steps(stmt.body),
                        self._steps(stmt.orelse),
                    )
                )
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                self._call_steps(stmt.iter, out)
                out.append(LoopStep(stmt.lineno, self._steps(stmt.body), self._steps(stmt.orelse)))
            elif isinstance(stmt, ast.While):
                self._call_steps(stmt.test, out)
                out.append(LoopStep(stmt.lineno, self._steps(stmt.body), self._steps(stmt.orelse)))
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    self._call_steps(item.context_expr, out)
                out.extend(self._steps(stmt.body))
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                try_stmt = stmt
                out.append(
                    TryStep(
                        stmt.lineno,
                        self._steps(try_stmt.body),  # type: ignore[attr-defined]
                        tuple(self._steps(h.body) for h in try_stmt.handlers),  # type: ignore[attr-defined]
                        self._steps(try_stmt.orelse),  # type: ignore[attr-defined]
                        self._steps(try_stmt.finalbody),  # type: ignore[attr-defined]
                    )
                )
            elif isinstance(stmt, ast.Match):
                self._call_steps(stmt.subject, out)
                cases = [self._steps(case.body) for case in stmt.cases]
                # each case is an alternative; model as nested branches
                rest: tuple[Step, ...] = ()
                for case_steps in reversed(cases):
                    rest = (BranchStep(stmt.lineno, None, None, case_steps, rest),)
                out.extend(rest)
            elif isinstance(stmt, ast.Return):
                self.nodes.append(stmt)
                if stmt.value is not None:
                    self._call_steps(stmt.value, out)
                out.append(ExitStep(stmt.lineno, "return"))
            elif isinstance(stmt, ast.Raise):
                if stmt.exc is not None:
                    self._call_steps(stmt.exc, out)
                out.append(ExitStep(stmt.lineno, "raise"))
            elif isinstance(stmt, ast.Assert):
                self._call_steps(stmt.test, out)
                role, _ = _role_of(stmt.test, flag)
                if role is not None:
                    out.append(RoleAssertStep(stmt.lineno, role))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            else:
                self._call_steps(stmt, out)
        return tuple(out)

    def read(self) -> FunctionFacts:
        self.facts.steps = self._steps(self.node.body)
        self._read_dicts()
        return self.facts

    def self_attrs(self, out: dict[str, tuple[str, ...]]) -> None:
        """``self.X = ...``: the class names X may hold (into ``out``)."""
        if self.self_name is None:
            return
        env: dict[str, tuple[str, ...]] = {}
        for node in self.nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found = _candidates(node.value, env)
                        env[target.id] = tuple(dict.fromkeys(env.get(target.id, ()) + found))
                    elif (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == self.self_name
                    ):
                        found = _candidates(node.value, env)
                        if found:
                            merged = out.get(target.attr, ()) + found
                            out[target.attr] = tuple(dict.fromkeys(merged))


#: Nodes with nothing to record below them.
_LEAVES = frozenset(
    {ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue}
)
#: Nodes whose bodies do not run where they stand.
_NOT_EXECUTED = frozenset({ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
#: Nodes the dict and attribute readers look at.
_RECORDED = frozenset(
    {
        ast.Import,
        ast.ImportFrom,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Delete,
        ast.Subscript,
        ast.Call,
        ast.Return,
    }
)


def _candidates(node: ast.expr | None, env: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Class names an expression may construct or name (following local variables)."""
    if node is None:
        return ()
    if isinstance(node, ast.Call):
        callee = dotted(node.func)
        name = last_name(callee)
        if name == "partial" and node.args:
            out: tuple[str, ...] = ()
            for arg in node.args:
                out += _candidates(arg, env)
            return tuple(dict.fromkeys(out))
        if isinstance(node.func, ast.Name) and node.func.id in env:
            return env[node.func.id]
        if isinstance(node.func, (ast.Name, ast.Attribute)):
            return (name,)
        return ()
    if isinstance(node, ast.Name):
        return env.get(node.id, (node.id,))
    if isinstance(node, ast.IfExp):
        return tuple(dict.fromkeys(_candidates(node.body, env) + _candidates(node.orelse, env)))
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    return ()


def _is_driver_only_marker(node: ast.expr | None) -> bool:
    """``{"runnercheck": "driver-only", ...}`` or ``dict(runnercheck="driver-only")``."""
    if isinstance(node, ast.Dict):
        return any(
            key is not None
            and _str_const(key) == DRIVER_ONLY_METADATA_KEY
            and _str_const(item) == DRIVER_ONLY_METADATA_VALUE
            for key, item in zip(node.keys, node.values, strict=True)
        )
    if isinstance(node, ast.Call) and dotted(node.func) == "dict":
        return any(
            kw.arg == DRIVER_ONLY_METADATA_KEY
            and _str_const(kw.value) == DRIVER_ONLY_METADATA_VALUE
            for kw in node.keywords
        )
    return False


def _field_facts(stmt: ast.AnnAssign) -> FieldFacts | None:
    if not isinstance(stmt.target, ast.Name):
        return None
    annotation = ast.unparse(stmt.annotation)
    if "ClassVar" in annotation or "InitVar" in annotation:
        return None
    driver_only = False
    init = True
    metadata_ref = None
    value = stmt.value
    if isinstance(value, ast.Call) and last_name(dotted(value.func)) == "field":
        for kw in value.keywords:
            if kw.arg == "metadata":
                if _is_driver_only_marker(kw.value):
                    driver_only = True
                elif isinstance(kw.value, (ast.Name, ast.Attribute)):
                    metadata_ref = dotted(kw.value)
            if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                init = False
    return FieldFacts(
        name=stmt.target.id,
        line=stmt.lineno,
        col=stmt.col_offset + 1,
        annotation=annotation,
        has_default=value is not None,
        driver_only=driver_only,
        init=init,
        metadata_ref=metadata_ref,
    )


def _class_facts(
    node: ast.ClassDef, path: str, imports: dict[str, str], contract: Contract
) -> ClassFacts:
    bases: list[str] = []
    base_args: list[tuple[str, ...]] = []
    for base in node.bases:
        if isinstance(base, ast.Subscript):
            bases.append(dotted(base.value))
            base_args.append(_names_in(base.slice))
        else:
            bases.append(dotted(base))
            base_args.append(())
    decorators = _decorator_names(node.decorator_list)
    facts = ClassFacts(
        name=node.name,
        path=path,
        line=node.lineno,
        col=node.col_offset + 1,
        end_line=node.end_lineno or node.lineno,
        bases=tuple(bases),
        base_args=tuple(base_args),
        decorators=decorators,
        is_dataclass=any(last_name(d) == "dataclass" for d in decorators),
    )
    fields: list[FieldFacts] = []
    abstract: list[str] = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign):
            if facts.is_dataclass:
                field_facts = _field_facts(stmt)
                if field_facts is not None:
                    fields.append(field_facts)
            if isinstance(stmt.target, ast.Name):
                if stmt.value is not None:
                    facts.class_attrs[stmt.target.id] = _names_in(stmt.value)
                elif not facts.is_dataclass:
                    facts.annotations[stmt.target.id] = _names_in(stmt.annotation)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    facts.class_attrs[target.id] = _names_in(stmt.value)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            reader = _FunctionReader(
                stmt, f"{node.name}.{stmt.name}", path, imports, contract, in_class=True
            )
            method = reader.read()
            facts.methods[stmt.name] = method
            if method.is_abstract:
                abstract.append(stmt.name)
            reader.self_attrs(facts.self_attrs)
    facts.fields = tuple(fields)
    facts.abstract_methods = tuple(abstract)
    return facts


def _imports(node: ast.Import | ast.ImportFrom, out: dict[str, str]) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                out[alias.asname] = alias.name
            else:
                head = alias.name.split(".", 1)[0]
                out.setdefault(head, head)
        return
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        out[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name


def suppressions(source: str) -> dict[int, frozenset[str] | None]:
    """``# runnercheck: ignore[RC101, RC102]`` (or bare) comments by line."""
    found: dict[int, frozenset[str] | None] = {}
    if "runnercheck:" not in source and "RUNNERCHECK:" not in source.upper():
        return found
    for number, text in enumerate(source.splitlines(), start=1):
        if "#" not in text:
            continue
        for match in _SUPPRESS.finditer(text):
            codes = match.group(1)
            if codes is None or not codes.strip():
                found[number] = None
            elif found.get(number, frozenset()) is not None:
                parsed = {c.strip().upper() for c in codes.split(",") if c.strip()}
                found[number] = frozenset(parsed | set(found.get(number) or ()))
    return found


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Top-level statements, descending into ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out.extend(_module_level(stmt.body))
            out.extend(_module_level(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            out.extend(_module_level(stmt.body))
            for handler in stmt.handlers:
                out.extend(_module_level(handler.body))
            out.extend(_module_level(stmt.orelse))
            out.extend(_module_level(stmt.finalbody))
        elif isinstance(stmt, ast.With):
            out.extend(_module_level(stmt.body))
        else:
            out.append(stmt)
    return out


def extract_tree(
    tree: ast.Module, path: str, source: str = "", contract: Contract = VLLM
) -> ModuleFacts:
    """Facts of an already parsed module."""
    facts = ModuleFacts(path=path, suppressions=suppressions(source) if source else {})
    statements = _module_level(tree.body)
    for stmt in statements:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _imports(stmt, facts.imports)
    markers: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, ast.Assign) and _is_driver_only_marker(stmt.value):
            markers.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and _is_driver_only_marker(stmt.value)
        ):
            markers.add(stmt.target.id)
    facts.driver_only_constants = frozenset(markers)
    for stmt in statements:
        if isinstance(stmt, ast.ClassDef):
            facts.classes[stmt.name] = _class_facts(stmt, path, facts.imports, contract)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            facts.functions[stmt.name] = _FunctionReader(
                stmt, stmt.name, path, facts.imports, contract, in_class=False
            ).read()
    return facts


def extract_source(source: str | bytes, path: str, contract: Contract = VLLM) -> ModuleFacts:
    """Facts of one file's text; a file that does not parse gets ``syntax_error`` set."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        return ModuleFacts(
            path=path,
            syntax_error=SyntaxErrorFacts(line, max(col, 1), exc.msg),
            suppressions=suppressions(text),
        )
    except ValueError as exc:  # e.g. null bytes
        return ModuleFacts(path=path, syntax_error=SyntaxErrorFacts(1, 1, str(exc)))
    except (RecursionError, MemoryError) as exc:  # nesting deeper than Python itself accepts
        return ModuleFacts(path=path, syntax_error=SyntaxErrorFacts(1, 1, parse_failure(exc)))
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return extract_tree(tree, path, text, contract)


def extract_file(
    path: str | Path, contract: Contract = VLLM, display_path: str | None = None
) -> ModuleFacts:
    """Facts of one file on disk (``display_path`` is the path recorded in the facts)."""
    data = Path(path).read_bytes()
    return extract_source(data, display_path or str(path), contract)
