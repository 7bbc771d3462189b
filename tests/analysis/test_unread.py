"""Classes that rest on a base of a package that was not read
(:mod:`runnercheck.analysis.unread`): a vendor plugin checked without its engine."""

from __future__ import annotations

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from tests.analysis.sources import class_named, facts_of

PLUGIN = """\
from vllm.worker.worker_base import LocalOrDistributedWorkerBase, WorkerBase
from vllm.worker.model_runner_base import ModelRunnerBase
from vendor_extras import Mixin


class NPUWorker(LocalOrDistributedWorkerBase):
    def __init__(self):
        self.model_runner = NPUModelRunner()


class NPUModelRunner(ModelRunnerBase):
    def execute_model(self, model_input, kv_caches):
        return model_input


class PlainWorker(WorkerBase):
    def execute_model(self, request=None):
        return []


class ChildWorker(NPUWorker):
    pass


class WithMixin(Mixin):
    pass
"""


def project(packages: frozenset[str]) -> Project:
    return Project([facts_of(PLUGIN, "acme/npu.py")], unread_packages=packages)


def named(p: Project, name: str) -> ClassFacts:
    return class_named(p, name)


def test_a_class_deriving_from_the_unread_engine_s_step_worker() -> None:
    p = project(frozenset({"vllm"}))
    own = p.unread.own(named(p, "NPUWorker"))
    assert own is not None and (own.base, own.package) == ("LocalOrDistributedWorkerBase", "vllm")
    assert own.why() == (
        "NPUWorker derives from LocalOrDistributedWorkerBase of vllm, which was not read: "
        "what it does cannot be known"
    )
    # along the MRO
    child = p.unread.own(named(p, "ChildWorker"))
    assert child is not None and child.cls.name == "NPUWorker"


def test_the_contract_s_interfaces_hide_nothing() -> None:
    p = project(frozenset({"vllm"}))
    assert p.unread.own(named(p, "PlainWorker")) is None  # the first worker base
    assert p.unread.own(named(p, "NPUModelRunner")) is None  # the first runner base
    # but the runner goes with a worker that rests on the unread step
    behind = p.unread.behind(named(p, "NPUModelRunner"))
    assert behind is not None and behind.cls.name == "NPUWorker"
    assert p.unread.behind(named(p, "NPUModelRunner"), partners=False) is None


def test_only_the_packages_named_as_unread_count() -> None:
    assert project(frozenset()).unread.own(named(project(frozenset()), "NPUWorker")) is None
    p = project(frozenset({"vendor_extras"}))
    assert p.unread.own(named(p, "NPUWorker")) is None
    found = p.unread.own(named(p, "WithMixin"))
    assert found is not None and found.package == "vendor_extras"
