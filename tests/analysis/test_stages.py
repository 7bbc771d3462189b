"""Where a worker and its runner stand in the migration
(:mod:`runnercheck.analysis.stages`): legacy or merged, read from what each does, and
the pairs whose sides are at different stages."""

from __future__ import annotations

from runnercheck.analysis.project import Project
from runnercheck.analysis.stages import mixed_pairs, runner_stage, worker_stage
from tests.analysis.sources import class_named, project_of

LEGACY_WORKER = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def __init__(self):
        self.model_runner = RUNNER()

    def execute_model(self, seqs=None):
        broadcast_tensor_dict({"n": 1}, src=0)
        return self.model_runner.execute_model(seqs, None)
"""

MERGED_WORKER = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def __init__(self):
        self.model_runner = RUNNER()

    def execute_model(self, seqs=None):
        model_input = self.model_runner.prepare_model_input(seqs)
        broadcast_tensor_dict(model_input.as_broadcastable_tensor_dict(), src=0)
        return self.model_runner.execute_model(model_input, None)
"""

RUNNERS = """\
from vllm.distributed import broadcast_tensor_dict


class LegacyRunner:
    def execute_model(self, seqs, kv_caches):
        broadcast_tensor_dict({"tokens": seqs}, src=0)
        return self.model(seqs)


class MergedRunner:
    def prepare_model_input(self, seqs):
        return seqs

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        return tensor_dict

    def execute_model(self, model_input, kv_caches):
        return self.model(model_input)
"""


def project(worker: str, runner: str) -> Project:
    return project_of(
        {
            "acme/worker.py": worker.replace("RUNNER", runner),
            "acme/runners.py": RUNNERS,
            "acme/__init__.py": "",
        }
    )


def test_the_stage_of_each_side() -> None:
    p = project(LEGACY_WORKER, "LegacyRunner")
    worker = class_named(p, "Worker")
    assert worker_stage(p, worker, "model_runner") == ("legacy", 10, "execute_model")
    assert runner_stage(p, class_named(p, "LegacyRunner")) == "legacy"
    assert runner_stage(p, class_named(p, "MergedRunner")) == "merged"
    merged = project(MERGED_WORKER, "MergedRunner")
    assert worker_stage(merged, class_named(merged, "Worker"), "model_runner") == (
        "merged",
        9,
        "prepare_model_input",
    )
    assert worker_stage(p, worker, "other") is None
    partial = project_of(
        {
            "acme/r.py": """\
            class PrepareOnly:
                def prepare_model_input(self, seqs):
                    return seqs

                def execute_model(self, model_input, kv_caches): ...

            class StubbedRunner:
                def prepare_model_input(self, seqs):
                    raise NotImplementedError

                def execute_model(self, seqs, kv_caches): ...
            """
        }
    )
    # one merged method defined is enough; a stub is no definition (nor legacy: the
    # name resolves)
    assert runner_stage(partial, class_named(partial, "PrepareOnly")) == "merged"
    assert runner_stage(partial, class_named(partial, "StubbedRunner")) is None


def test_sides_at_the_same_stage_are_no_mixed_pair() -> None:
    for worker, runner in ((LEGACY_WORKER, "LegacyRunner"), (MERGED_WORKER, "MergedRunner")):
        p = project(worker, runner)
        assert mixed_pairs(p, class_named(p, "Worker")) == []


def test_a_legacy_worker_on_a_merged_runner() -> None:
    p = project(LEGACY_WORKER, "MergedRunner")
    (pair,) = mixed_pairs(p, class_named(p, "Worker"))
    assert (pair.worker_stage, pair.runner_stage, pair.line, pair.call) == (
        "legacy",
        "merged",
        10,
        "execute_model",
    )
    assert pair.message.startswith(
        "half-applied migration: Worker (legacy) calls `self.model_runner.execute_model` "
        "with the request list, but MergedRunner is already migrated (it takes a model input)"
    )


def test_a_merged_worker_on_a_legacy_runner() -> None:
    p = project(MERGED_WORKER, "LegacyRunner")
    (pair,) = mixed_pairs(p, class_named(p, "Worker"))
    assert (pair.worker_stage, pair.runner_stage, pair.call) == (
        "merged",
        "legacy",
        "prepare_model_input",
    )
    assert "which the legacy LegacyRunner does not define" in pair.message


def test_a_base_outside_the_analysed_files_is_no_stage() -> None:
    worker = LEGACY_WORKER.replace("class Worker:", "class Worker(VendorWorker):")
    p = project(worker, "MergedRunner")
    assert worker_stage(p, class_named(p, "Worker"), "model_runner") is None
    assert mixed_pairs(p, class_named(p, "Worker")) == []
