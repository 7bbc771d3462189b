"""Roles of classes (:mod:`runnercheck.analysis.roles`): workers and runners by their
shape, abstract bases, the runners a worker drives, and which classes are on the V0
broadcast contract (a V1 worker and runner, which build their input on every rank,
are not)."""

from __future__ import annotations

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract
from tests.analysis.sources import class_named, facts_of, project_of

V0 = """\
from typing import Generic, TypeVar
from abc import ABC, abstractmethod
from vllm.distributed import broadcast_tensor_dict
from vllm.worker.model_runner_base import ModelRunnerBase
from vllm.worker.worker_base import LocalOrDistributedWorkerBase

T = TypeVar("T")


class GPURunnerBase(ModelRunnerBase[T]):
    pass


class GPURunner(GPURunnerBase["ModelInput"]):
    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        ...

    def execute_model(self, model_input, kv_caches):
        ...


class SmallRunner:
    def execute_model(self, model_input):
        ...


class Worker(LocalOrDistributedWorkerBase):
    def __init__(self, small):
        if small:
            self.model_runner = SmallRunner()
        else:
            self.model_runner = GPURunner()
        self.cache = dict()


class FactoryWorker(LocalOrDistributedWorkerBase):
    model_runner: GPURunner

    def __init__(self):
        self.model_runner = self._make()


class AbstractHelperWorker(ABC):
    @abstractmethod
    def execute_model(self): ...


class ToolMixin:
    def execute_model(self): ...


class Generic2(Generic[T]):
    pass


class Holder(Generic2[T]):
    pass
"""

#: vLLM's V1 shape: the runner builds its own input on every rank from the scheduler
#: output; nothing is broadcast.
V1 = """\
class GPUModelRunnerV1:
    def execute_model(self, scheduler_output):
        inputs = self._prepare(scheduler_output)
        return self.model(inputs)

    def _prepare(self, scheduler_output):
        return self.prepare_model_input(scheduler_output)

    def prepare_model_input(self, scheduler_output):
        return scheduler_output


class WorkerV1Worker:
    def __init__(self):
        self.model_runner = GPUModelRunnerV1()

    def execute_model(self, scheduler_output):
        return self.model_runner.execute_model(scheduler_output)
"""


def project() -> Project:
    return project_of({"acme/v0.py": V0, "acme/v1.py": V1})


def named(p: Project, *names: str) -> list[ClassFacts]:
    return [class_named(p, name) for name in names]


def test_workers_and_runners_by_base_or_by_name_and_step() -> None:
    p = project()
    assert sorted(c.name for c in p.roles.workers()) == [
        "AbstractHelperWorker",
        "FactoryWorker",
        "Worker",
        "WorkerV1Worker",
    ]
    assert sorted(c.name for c in p.roles.runners()) == [
        "GPUModelRunnerV1",
        "GPURunner",
        "GPURunnerBase",
        "SmallRunner",
    ]
    # named like a worker, but no step of its own
    plain = project_of({"acme/plain.py": "class PlainWorker:\n    pass\n"})
    assert plain.roles.workers() == []


def test_abstract_by_declaration_base_name_or_an_open_type_variable() -> None:
    p = project()
    abstract = {c.name for c in p.hierarchy.all_classes() if p.roles.is_abstract(c)}
    # still generic over T: ``Generic2`` and ``Holder`` are bases of other classes;
    # ``GPURunner`` fixes its input type
    assert abstract == {
        "GPURunnerBase",
        "AbstractHelperWorker",
        "ToolMixin",
        "Generic2",
        "Holder",
    }
    assert not p.roles.is_abstract(class_named(p, "GPURunner"))


def test_the_runners_a_worker_holds_by_assignment_or_by_annotation() -> None:
    p = project()
    worker, factory = named(p, "Worker", "FactoryWorker")
    assert {a: [r.name for r in rs] for a, rs in p.roles.runner_candidates(worker).items()} == {
        "model_runner": ["SmallRunner", "GPURunner"]
    }
    # built by a factory method: the annotation says which runner
    assert {a: [r.name for r in rs] for a, rs in p.roles.runner_candidates(factory).items()} == {
        "model_runner": ["GPURunner"]
    }
    pairs = {(w.name, r.name) for w, r in p.roles.worker_runner_pairs()}
    assert pairs == {
        ("Worker", "SmallRunner"),
        ("Worker", "GPURunner"),
        ("FactoryWorker", "GPURunner"),
        ("WorkerV1Worker", "GPUModelRunnerV1"),
    }
    assert {r.name for r in p.roles.paired_runners()} == {
        "SmallRunner",
        "GPURunner",
        "GPUModelRunnerV1",
    }


def test_a_v0_pair_is_on_the_contract_and_a_v1_pair_is_not() -> None:
    p = project()
    gpu, worker, small = named(p, "GPURunner", "Worker", "SmallRunner")
    assert p.roles.uses_contract(gpu)  # a runner base and the rebuild method
    assert p.roles.uses_contract(worker)  # the step worker base
    assert not p.roles.uses_contract(small)
    assert p.roles.on_contract(small)  # paired with a worker that uses it
    v1_runner, v1_worker = named(p, "GPUModelRunnerV1", "WorkerV1Worker")
    assert not p.roles.uses_contract(v1_runner) and not p.roles.uses_contract(v1_worker)
    assert p.roles.builds_own_input(v1_runner)
    assert not p.roles.on_contract(v1_runner)
    assert not p.roles.on_contract(v1_worker)  # every runner it holds builds its own input


def test_calling_the_broadcast_puts_a_class_on_the_contract() -> None:
    p = project_of(
        {
            "acme/spec.py": """\
            from vllm.distributed import broadcast_tensor_dict

            class SpecWorker:
                def execute_model(self, request=None):
                    return broadcast_tensor_dict(src=0)

            class Child(SpecWorker):
                pass
            """
        }
    )
    spec, child = named(p, "SpecWorker", "Child")
    assert p.roles.uses_contract(spec) and p.roles.uses_contract(child)  # along the MRO


def test_a_configured_contract_renames_the_bases() -> None:
    source = """\
    class EngineRunnerBase:
        pass

    class MyRunner(EngineRunnerBase):
        pass
    """
    default = project_of({"acme/r.py": source})
    assert default.roles.runners() == []
    renamed = Contract(runner_bases=("EngineRunnerBase",))
    p = Project([facts_of(source, "acme/r.py")], renamed)
    assert sorted(c.name for c in p.roles.runners()) == ["EngineRunnerBase", "MyRunner"]
