"""Reading one file (:mod:`runnercheck.analysis.extract`): what the facts of a class,
a function and a module hold, which branches each role runs, and what makes the
reader give up on a file (a syntax error, null bytes, nesting deeper than Python
parses) or mark it (``# runnercheck: ignore`` comments)."""

from __future__ import annotations

import ast
import pickle

import pytest

from runnercheck.analysis.conditions import Atom, Not
from runnercheck.analysis.extract import constant_return, extract_source, literal_dict
from runnercheck.analysis.model import (
    BranchStep,
    CallStep,
    LoopStep,
    RoleAssertStep,
    flatten_calls,
)
from tests.analysis.sources import facts_of

# ------------------------------------------------- files that do not parse


@pytest.mark.parametrize(
    ("source", "line", "message"),
    [
        ("def f(:\n    pass\n", 1, "invalid syntax"),
        ("x = 1\nclass A:\n  def f(self):\n pass\n", 4, "unindent"),
        ("a\0b\n", 1, "null bytes"),
        ("x = " + "(" * 300 + "1" + ")" * 300 + "\n", 1, "too many nested parentheses"),
        ("x = " + "-" * 200_000 + "1\n", 1, "nested too deeply"),
        (b"\xff = 1\n", 1, "codec can't decode"),
    ],
)
def test_a_file_that_does_not_parse_is_a_fact_not_an_exception(
    source: str | bytes, line: int, message: str
) -> None:
    facts = extract_source(source, "acme/broken.py")
    assert facts.syntax_error is not None
    assert facts.syntax_error.line == line and facts.syntax_error.col >= 1
    assert message in facts.syntax_error.message
    assert facts.classes == {} and facts.functions == {}


def test_ignore_comments_mark_their_lines_even_in_a_file_that_does_not_parse() -> None:
    source = (
        "x = 1  # runnercheck: ignore[rc101, RC102]\n"
        "y = 2  # runnercheck: ignore\n"
        "z = 3  # an ordinary comment\n"
    )
    expected = {1: frozenset({"RC101", "RC102"}), 2: None}
    assert facts_of(source).suppressions == expected
    assert extract_source(source + "def f(:\n", "acme/x.py").suppressions == expected


def test_facts_pickle_and_come_back_equal() -> None:
    """The facts cache and the worker processes hand facts on pickled."""
    facts = facts_of(CLASSES)
    assert pickle.loads(pickle.dumps(facts)) == facts


# ----------------------------------------------------------- the module

CLASSES = """\
import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Optional, TypeVar
from .base import RunnerBase as Base
from .. import markers

T = TypeVar("T")
NOT_SENT = {"driver_only": True}


@dataclass(frozen=True)
class Input(Generic[T]):
    tokens: list
    # Driver-only: not broadcast; the other ranks get None.
    seq_lens: Optional[list] = None
    pooling: Optional[dict] = field(default=None, metadata=NOT_SENT)
    sampling: Optional[dict] = field(default=None, metadata={"driver_only": True})
    lora: Optional[dict] = field(default=None, metadata=markers.LORA)
    cached: int = field(default=0, init=False)
    kind: ClassVar[str] = "input"
    scale: int = 1

    def as_broadcastable_tensor_dict(self):
        \"\"\"The dict.\"\"\"
        tensor_dict = {"tokens": self.tokens}
        tensor_dict["scale"] = self.scale
        return tensor_dict


class Runner(Base["Input"]):
    do_metadata_broadcast = False
    max_batch: int = 8
    model_runner: "Runner"

    def __init__(self, config, lora_config):
        if config.lora is not None or config.prompt_adapter:
            raise NotImplementedError("lora")
        assert not config.speculative
        self.config = config
        self.model = Model(config)

    @property
    def rank(self):
        return 0

    @staticmethod
    def helper(x, y=3):
        ...

    @classmethod
    def build(cls, a):
        pass

    def name(self):
        \"\"\"Its name.\"\"\"
        return "runner"
"""


def test_imports_markers_and_type_variables() -> None:
    facts = facts_of(CLASSES, "acme/worker/runner.py")
    assert facts.imports["Base"] == ".base.RunnerBase"
    assert facts.import_sources["markers"] == ("", "markers", 2)
    assert facts.imports["field"] == "dataclasses.field"
    assert facts.import_sources["Base"] == ("base", "RunnerBase", 1)
    assert facts.driver_only_constants == frozenset({"NOT_SENT"})
    assert facts.typevars == frozenset({"T"})
    assert {"Input", "Runner", "T", "NOT_SENT", "Base"} <= facts.top_level_names
    assert facts.loaded_names is None  # only read when asked for
    named = extract_source(CLASSES, "acme/worker/runner.py", names=True)
    assert named.loaded_names is not None and {"Model", "Optional"} <= named.loaded_names


def test_a_dataclass_s_fields_and_how_each_is_declared_driver_only() -> None:
    cls = facts_of(CLASSES).classes["Input"]
    assert cls.is_dataclass and cls.bases == ("Generic",) and cls.base_args == (("T",),)
    fields = {f.name: f for f in cls.fields}
    assert list(fields) == ["tokens", "seq_lens", "pooling", "sampling", "lora", "cached", "scale"]
    # the comment and the inline marker are read here; a marker constant is resolved
    # by the hierarchy (it may live in another module)
    assert {n for n, f in fields.items() if f.driver_only} == {"seq_lens", "sampling"}
    assert (fields["pooling"].metadata_ref, fields["lora"].metadata_ref) == (
        "NOT_SENT",
        "markers.LORA",
    )
    assert not fields["cached"].init
    assert not fields["tokens"].has_default and fields["scale"].has_default
    assert fields["scale"].default == "1"
    assert fields["tokens"].line == 13
    assert cls.class_constants == {}  # a dataclass's defaults are its fields' defaults


def test_a_class_s_methods_constants_attributes_and_refusals() -> None:
    cls = facts_of(CLASSES).classes["Runner"]
    assert cls.bases == ("Base",) and cls.base_args == (("Input",),)
    assert cls.class_constants == {"do_metadata_broadcast": "False", "max_batch": "8"}
    assert cls.annotations == {"model_runner": ("Runner",)}
    assert set(cls.self_attrs) == {"config", "model"}
    assert cls.self_attrs["model"] == ("Model",)
    methods = cls.methods
    assert methods["rank"].is_property and methods["rank"].constant_return == "0"
    assert methods["helper"].is_staticmethod and methods["helper"].params == ("x", "y")
    assert methods["helper"].param_defaults == {"y": "3"} and methods["helper"].is_stub
    assert methods["build"].is_classmethod and methods["build"].is_stub
    assert methods["name"].constant_return == "'runner'" and not methods["name"].is_stub
    assert methods["__init__"].qualname == "Runner.__init__"
    # ``if p.x is not None: raise`` and ``assert not p.x``: the constructor refuses them
    assert methods["__init__"].refuses == {"config": ("lora", "prompt_adapter", "speculative")}


def test_a_literal_dict_then_statements_then_its_return() -> None:
    method = facts_of(CLASSES).classes["Input"].methods["as_broadcastable_tensor_dict"]
    literal = method.literal_dict
    assert literal is not None and literal.var == "tensor_dict"
    assert literal.items is not None and [k for k, _ in literal.items] == ["tokens"]
    assert len(literal.mutations) == 1 and "Name(id='_'" in literal.mutations[0]
    assert method.returns == ("tensor_dict",)
    assert set(method.dicts["tensor_dict"].keys) == {"tokens", "scale"}


def test_literal_dict_and_constant_return_on_bodies() -> None:
    def body(text: str) -> list[ast.stmt]:
        tree = ast.parse(text)
        func = tree.body[0]
        assert isinstance(func, ast.FunctionDef)
        return func.body

    assert literal_dict(body("def f():\n    d = {}\n    return e\n")) is None
    assert literal_dict(body("def f():\n    return {}\n")) is None
    dynamic = literal_dict(body("def f(k):\n    d = {k: 1}\n    return d\n"))
    assert dynamic is not None and dynamic.items is None
    assert constant_return(body("def f():\n    'doc'\n    return None\n")) == "None"
    assert constant_return(body("def f():\n    x = 1\n    return x\n")) is None


# ------------------------------------------------------- steps and roles

STEPS = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def execute_model(self, request=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"n": request.n}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
        for _ in range(max(data["k"], 1)):
            self.inner.execute_model()
        if self.rank != 0:
            broadcast_tensor_dict(src=0)
        if request.flag:
            broadcast_tensor_dict({}, src=0)

    def _non_driver(self):
        assert not self.is_driver_worker
        broadcast_tensor_dict(src=0)
"""


def test_branches_on_the_driver_flag_or_a_rank_test_name_the_role_of_each_side() -> None:
    methods = facts_of(STEPS).classes["Worker"].methods
    branches = [s for s in methods["execute_model"].steps if isinstance(s, BranchStep)]
    assert [(b.line, b.then_role, b.else_role) for b in branches] == [
        (6, "driver", "non-driver"),
        (12, None, None),  # a rank test: its role is read from the test
        (14, None, None),  # the request: no role
    ]
    assert branches[0].test == Atom("self.is_driver_worker", role="driver")
    assert branches[1].test == Not(Atom("self.rank", role="driver"))
    assert branches[2].test == Atom("request.flag")
    sends = [s for s in branches[0].body if isinstance(s, CallStep)]
    receives = [s for s in branches[0].orelse if isinstance(s, CallStep)]
    assert [(s.step_broadcast, s.sends, s.carries) for s in sends] == [
        (True, True, (("n", "request.n"),))
    ]
    assert [(s.step_broadcast, s.sends) for s in receives] == [(True, False)]
    (empty,) = [s for s in branches[2].body if isinstance(s, CallStep)]
    assert empty.sends_empty
    (role,) = [s for s in methods["_non_driver"].steps if isinstance(s, RoleAssertStep)]
    assert role.role == "non-driver"


def test_a_loop_keeps_its_count_as_written() -> None:
    steps = facts_of(STEPS).classes["Worker"].methods["execute_model"].steps
    (loop,) = [s for s in steps if isinstance(s, LoopStep)]
    assert loop.count == "max(data['k'], 1)"
    assert [c.callee for c in flatten_calls(loop.body)] == ["self.inner.execute_model"]
