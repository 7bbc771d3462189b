"""Uses and reachability (:mod:`runnercheck.analysis.uses`): the inputs a runner
builds, the fields every rank reads on its path (never ``prepare_model_input``, never
what a rank writes itself, never under a value the constructor refuses), and workers
whose broadcast never runs."""

from __future__ import annotations

from runnercheck.analysis.model import BranchStep
from runnercheck.analysis.project import Project
from runnercheck.analysis.uses import calls_on_path, raises_for
from tests.analysis.sources import class_named, facts_of, project_of

ENGINE = """\
from dataclasses import dataclass
from typing import Optional
from vllm.worker.model_runner_base import ModelRunnerBase, ModelRunnerInputBase
from vllm.worker.worker_base import LocalOrDistributedWorkerBase


@dataclass(frozen=True)
class ModelInput(ModelRunnerInputBase):
    tokens: Optional[list] = None
    seq_lens: Optional[list] = None
    lora_requests: Optional[list] = None
    scratch: Optional[list] = None

    def as_broadcastable_tensor_dict(self):
        return {"tokens": self.tokens}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(**tensor_dict)


class GPURunner(ModelRunnerBase[ModelInput]):
    def __init__(self, lora_config):
        if lora_config is not None:
            raise NotImplementedError
        assert self.lora_config is None

    def prepare_model_input(self, model_input):
        return model_input.seq_lens

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        return ModelInput.from_broadcasted_tensor_dict(tensor_dict)

    def execute_model(self, model_input, kv_caches):
        model_input.scratch = []
        self.prepare_model_input(model_input)
        if self.lora_config:
            self.set_lora(model_input.lora_requests)
        self._run(model_input)
        return model_input.scratch

    def _run(self, model_input):
        return self.model(model_input.tokens)


class Worker(LocalOrDistributedWorkerBase):
    def __init__(self):
        self.model_runner = GPURunner(None)


class SingleWorker(LocalOrDistributedWorkerBase):
    do_metadata_broadcast = False

    def __init__(self):
        self.model_runner = GPURunner(None)
"""


def project(source: str = ENGINE) -> Project:
    return project_of({"acme/engine.py": source})


def test_the_inputs_a_runner_builds() -> None:
    p = project()
    runner, model_input = class_named(p, "GPURunner"), class_named(p, "ModelInput")
    assert p.uses.runner_inputs(runner) == [model_input]
    assert p.uses.runners_of(model_input) == [runner]
    assert p.uses.sends_through(model_input, model_input)


def test_the_fields_every_rank_reads() -> None:
    """``tokens`` through ``_run``; not ``seq_lens`` (prepare_model_input, the
    driver's alone), not ``scratch`` (each rank writes it), not ``lora_requests``
    (read only under ``self.lora_config``, which the constructor refuses)."""
    p = project()
    assert p.uses.every_rank_reads(class_named(p, "ModelInput")) == {"tokens"}
    plain = project_of({"acme/other.py": "class Other:\n    pass\n"})
    assert plain.uses.every_rank_reads(class_named(plain, "Other")) is None


def test_a_worker_whose_broadcast_switch_is_off_never_broadcasts() -> None:
    p = project()
    assert p.uses.never_broadcasts(class_named(p, "SingleWorker"))
    assert not p.uses.never_broadcasts(class_named(p, "Worker"))
    assert p.uses.silent_worker(class_named(p, "SingleWorker")) == (
        "SingleWorker.do_metadata_broadcast is always False: it never broadcasts"
    )
    # one worker still broadcasts: some rank rebuilds the input
    assert p.uses.unreachable_input(class_named(p, "ModelInput")) is None
    single = project(ENGINE.replace("class Worker(LocalOrDistributedWorkerBase):", "class Unused:"))
    assert single.uses.unreachable_input(class_named(single, "ModelInput")) == (
        "only SingleWorker rebuilds it, and its do_metadata_broadcast is always False"
    )


def test_the_calls_on_a_role_s_path_and_whether_it_raises() -> None:
    steps = (
        facts_of(
            """\
            class W:
                def f(self):
                    if self.is_driver_worker:
                        self.send()
                        return
                    self.receive()
                    if not self.is_driver_worker:
                        raise RuntimeError("driver only")
            """
        )
        .classes["W"]
        .methods["f"]
        .steps
    )
    assert isinstance(steps[0], BranchStep)
    driver, driver_through = calls_on_path(steps, "driver")
    other, other_through = calls_on_path(steps, "non-driver")
    # the driver returns, the other ranks raise: neither falls through the body
    assert ([c.callee for c in driver], driver_through) == (["self.send"], False)
    assert ([c.callee for c in other], other_through) == (["self.receive"], False)
    assert calls_on_path(steps[:2], "non-driver")[1]
    asserted = (
        facts_of(
            """\
            class W:
                def f(self):
                    assert not self.is_driver_worker
                    self.receive()
            """
        )
        .classes["W"]
        .methods["f"]
        .steps
    )
    assert calls_on_path(asserted, "driver") == ([], False)
    assert [c.callee for c in calls_on_path(asserted, "non-driver")[0]] == ["self.receive"]
    assert raises_for(steps, "non-driver") and not raises_for(steps, "driver")
