"""Wrapper workers (:mod:`runnercheck.analysis.wrappers`): the workers an attribute
may hold (by construction, a parameter's annotation, a class-level annotation, a
factory classmethod; an abstract worker standing for its concrete subclasses), and
the broadcasts of one step through the inner workers' steps, with loop counts kept
as written."""

from __future__ import annotations

import pytest

from runnercheck.analysis.project import Project
from runnercheck.analysis.wrappers import StepPath, evaluate
from tests.analysis.sources import class_named, project_of

SPEC = """\
from abc import ABC, abstractmethod
from vllm.distributed import broadcast_tensor_dict
from vllm.worker.worker_base import WorkerBase


class ProposerWorkerBase(WorkerBase, ABC):
    @abstractmethod
    def execute_model(self, request=None): ...


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": request.tokens}, src=0)
        else:
            broadcast_tensor_dict(src=0)


class MultiStepWorker(Worker, ProposerWorkerBase):
    pass


class SpecDecodeWorker:
    scorer_worker: Worker

    def __init__(self, proposer_worker: ProposerWorkerBase, scorer_worker, is_driver_worker):
        self.proposer_worker = proposer_worker
        self.scorer_worker = scorer_worker
        self.is_driver_worker = is_driver_worker

    @classmethod
    def create(cls, is_driver_worker):
        proposer = MultiStepWorker(is_driver_worker)
        return cls(proposer, Worker(is_driver_worker), is_driver_worker)

    def execute_model(self, request=None):
        if not self.is_driver_worker:
            return self._run_non_driver()
        k = request.num_lookahead_slots
        broadcast_tensor_dict({"k": k}, src=0)
        for _ in range(max(k, 1)):
            self.proposer_worker.execute_model(request)
        return self.scorer_worker.execute_model(request)

    def _run_non_driver(self):
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False
        for _ in range(max(data["k"], 1)):
            self.proposer_worker.execute_model()
        self.scorer_worker.execute_model()
        return True
"""


def project(source: str = SPEC) -> Project:
    return project_of({"acme/spec.py": source})


def test_the_workers_an_attribute_holds() -> None:
    p = project()
    spec = class_named(p, "SpecDecodeWorker")
    # the annotation names an abstract base, the factory builds its concrete subclass
    assert [c.name for c in p.wrappers.attr_classes(spec, "proposer_worker")] == ["MultiStepWorker"]
    assert [c.name for c in p.wrappers.attr_classes(spec, "scorer_worker")] == ["Worker"]
    assert p.wrappers.attr_classes(spec, "is_driver_worker") == ()
    assert {a: [c.name for c in cs] for a, cs in p.wrappers.inner_workers(spec).items()} == {
        "proposer_worker": ["MultiStepWorker"],
        "scorer_worker": ["Worker"],
    }
    assert p.wrappers.inner_workers(class_named(p, "Worker")) == {}
    # with no factory constructing it, the abstract base alone stands for its subclass
    factory = SPEC[
        SPEC.index("    @classmethod") : SPEC.index(
            "    def execute_model(self, request=None):\n        if not"
        )
    ]
    alone = project(SPEC.replace(factory, ""))
    held = alone.wrappers.attr_classes(class_named(alone, "SpecDecodeWorker"), "proposer_worker")
    assert [c.name for c in held] == ["MultiStepWorker"]


def test_a_factory_classmethod_says_what_a_plain_parameter_holds() -> None:
    """No annotation on either: ``cls(proposer, Worker(True), rank)`` in ``create``."""
    source = SPEC.replace("    scorer_worker: Worker\n\n", "").replace(
        "proposer_worker: ProposerWorkerBase", "proposer_worker"
    )
    p = project(source)
    spec = class_named(p, "SpecDecodeWorker")
    assert [c.name for c in p.wrappers.attr_classes(spec, "proposer_worker")] == ["MultiStepWorker"]
    assert [c.name for c in p.wrappers.attr_classes(spec, "scorer_worker")] == ["Worker"]


def test_one_step_through_the_inner_workers_per_role() -> None:
    p = project()
    step = p.wrappers.wrapper_step(class_named(p, "SpecDecodeWorker"))
    assert step is not None
    driver = step.most("driver")
    assert driver.describe() == (
        "1 (SpecDecodeWorker) + max(k, 1)·1 (proposer_worker: MultiStepWorker)"
        " + 1 (scorer_worker: Worker)"
    )
    assert [t.sends for t in driver.own] == [True]
    assert driver.symbolic
    assert driver.count({"k": 3}) == 5 and driver.count({"k": 0}) == 3
    assert driver.count() == 6  # every count at PROBE (4)
    other = step.most("non-driver")
    assert [t.times for t in other.inner] == [("max(data['k'], 1)",), ()]
    assert other.count({"data['k']": 2}) == 4
    # the own broadcast comes before the inner steps: a control dict
    assert driver in step.control_paths()


def test_a_worker_that_runs_no_inner_step_has_no_wrapper_step() -> None:
    p = project()
    assert p.wrappers.wrapper_step(class_named(p, "Worker")) is None
    assert p.wrappers.wrapper_step(class_named(p, "MultiStepWorker")) is None


@pytest.mark.parametrize(
    ("text", "values", "value"),
    [
        ("3", {}, 3),
        ("max(k, 1)", {"k": 0}, 1),
        ("self.n - 1", {"self.n": 5}, 4),
        ("data['k'] * 2", {"data['k']": 3}, 6),
        ("min(a, b) // 2", {"a": 9, "b": 7}, 3),
    ],
)
def test_evaluate(text: str, values: dict[str, int], value: int) -> None:
    assert evaluate(text, values) == value


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("k", {}),  # no value given
        ("k / 2", {"k": 4}),
        ("f(k)", {"k": 4}),
        ("k if a else b", {"k": 1, "a": 1, "b": 1}),
        ("k +", {"k": 1}),
        # a subscript is a value only under a literal key
        ("data[0]", {"data[0]": 1}),
        ("data[i]", {"data[i]": 1}),
    ],
)
def test_evaluate_refuses_what_is_not_a_count_or_has_no_value(
    text: str, values: dict[str, int]
) -> None:
    with pytest.raises(ValueError):
        evaluate(text, values)


def test_a_negative_count_runs_nothing() -> None:
    p = project()
    step = p.wrappers.wrapper_step(class_named(p, "SpecDecodeWorker"))
    assert step is not None
    times = StepPath(step.most("driver").terms[1:2]).times("n")
    assert times.count({"n": -2, "k": 3}) == 0
    assert times.count({"n": 2, "k": 3}) == 6
