"""Whether merge-broadcasts takes a worker/runner pair as found
(:mod:`runnercheck.analysis.mergeable`): a runner group broadcasting in several
methods (MIG101) or inside ``prepare_model_input`` (MIG105), a worker driving a runner
not found (MIG103), a runner no worker drives (MIG104)."""

from __future__ import annotations

from runnercheck.analysis.mergeable import (
    broadcasting_methods,
    group_runners,
    pair_refusal,
)
from runnercheck.analysis.project import Project
from tests.analysis.sources import class_named, project_of

PAIR = """\
from vllm.distributed import broadcast_tensor_dict
from vllm.worker.model_runner_base import ModelRunnerBase
from vllm.platforms import ExternalRunner


class ModelRunner(ModelRunnerBase):
    def prepare_input_tensors(self, seqs):
        if self.is_driver_worker:
            broadcast_tensor_dict({"n": 1}, src=0)
        else:
            broadcast_tensor_dict(src=0)

    def execute_model(self, seqs, kv_caches):
        return self.prepare_input_tensors(seqs)


class CPUModelRunner(ModelRunner):
    pass


class Worker:
    def __init__(self):
        self.model_runner = ModelRunner()

    def execute_model(self, seqs=None):
        return self.model_runner.execute_model(seqs, None)


class ExternalWorker:
    def __init__(self):
        self.model_runner = ExternalRunner()

    def execute_model(self, seqs=None):
        return self.model_runner.execute_model(seqs, None)


class LonelyRunner(ModelRunnerBase):
    def _send(self):
        broadcast_tensor_dict({"n": 1}, src=0)

    def execute_model(self, seqs, kv_caches):
        self._send()
"""


def project(source: str = PAIR) -> Project:
    return project_of({"acme/pair.py": source})


def test_a_pair_with_one_broadcasting_method_per_runner_is_taken() -> None:
    p = project()
    runner = class_named(p, "ModelRunner")
    assert broadcasting_methods(p, runner) == ["prepare_input_tensors"]
    # the runner, and the runner deriving from it; not the contract's base
    assert [c.name for c in group_runners(p, runner)] == ["ModelRunner", "CPUModelRunner"]
    assert pair_refusal(p, class_named(p, "Worker"), runner) is None
    # the contract's base read too (a vLLM tree): still not part of the group
    with_base = project_of(
        {
            "acme/pair.py": PAIR.replace(
                "from vllm.worker.model_runner_base import ModelRunnerBase",
                "from acme.model_runner_base import ModelRunnerBase",
            ),
            "acme/model_runner_base.py": "class ModelRunnerBase:\n    pass\n",
        }
    )
    runner = class_named(with_base, "ModelRunner")
    assert [c.name for c in with_base.hierarchy.mro(runner)] == ["ModelRunner", "ModelRunnerBase"]
    assert [c.name for c in group_runners(with_base, runner)] == [
        "ModelRunner",
        "CPUModelRunner",
    ]


def test_a_runner_group_broadcasting_in_two_methods_is_refused() -> None:
    source = PAIR.replace(
        "class CPUModelRunner(ModelRunner):\n    pass\n",
        "class CPUModelRunner(ModelRunner):\n"
        "    def _sync(self):\n"
        "        broadcast_tensor_dict(src=0)\n\n"
        "    def _sync_again(self):\n"
        "        broadcast_tensor_dict(src=0)\n",
    )
    p = project(source)
    refusal = pair_refusal(p, class_named(p, "Worker"), class_named(p, "ModelRunner"))
    assert refusal is not None
    assert (refusal.code, refusal.line) == ("MIG101", 22)
    assert "CPUModelRunner broadcasts in 2 methods (_sync, _sync_again)" == refusal.message


def test_a_broadcast_inside_prepare_model_input_is_refused() -> None:
    p = project(PAIR.replace("prepare_input_tensors", "prepare_model_input"))
    refusal = pair_refusal(p, class_named(p, "Worker"), class_named(p, "ModelRunner"))
    assert refusal is not None and (refusal.code, refusal.line) == ("MIG105", 9)


def test_a_worker_without_a_runner_found_and_a_runner_without_a_worker() -> None:
    p = project()
    external = pair_refusal(p, class_named(p, "ExternalWorker"), None)
    assert external is not None and external.code == "MIG103"
    assert "`self.model_runner`" in external.message
    lonely = pair_refusal(p, None, class_named(p, "LonelyRunner"))
    assert lonely is not None and (lonely.code, lonely.path) == ("MIG104", "acme/pair.py")
    plain = project_of({"acme/w.py": "class Worker:\n    def execute_model(self): ...\n"})
    alone = pair_refusal(plain, class_named(plain, "Worker"), None)
    assert alone is not None and alone.code == ""
