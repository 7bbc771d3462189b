"""What a non-driver rank holds at each entry point of a step
(:mod:`runnercheck.analysis.holds`): the literal flags its path gives the objects it
builds, and the ones a rewrite changes."""

from __future__ import annotations

from runnercheck.analysis.holds import (
    DEFAULT,
    Held,
    NonDriverValues,
    changed_values,
)
from runnercheck.analysis.project import Project
from tests.analysis.sources import project_of

LEGACY = """\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, seqs, kv_caches):
        if self.is_driver_worker:
            metadata = SamplingMetadata(perform_sampling=True, seqs=seqs)
            broadcast_tensor_dict({"n": 1}, src=0)
        else:
            broadcast_tensor_dict(src=0)
            metadata = SamplingMetadata(perform_sampling=False, seqs=None)
        return self.model(metadata)

    def profile_run(self):
        return self.execute_model([], None)


class Worker:
    def __init__(self, is_driver_worker):
        self.model_runner = ModelRunner(is_driver_worker)

    def execute_model(self, seqs=None):
        return self.model_runner.execute_model(seqs, None)
"""

#: After a rewrite: every rank builds the metadata with the driver flag.
FLAGGED = LEGACY.replace(
    "            metadata = SamplingMetadata(perform_sampling=False, seqs=None)\n",
    "            metadata = SamplingMetadata(perform_sampling=self.is_driver_worker, seqs=None)\n",
)
#: After a rewrite that leaves the flag to its default.
DEFAULTED = LEGACY.replace(
    "            metadata = SamplingMetadata(perform_sampling=False, seqs=None)\n",
    "            metadata = SamplingMetadata(seqs=None)\n",
)


def held(source: str) -> list[Held]:
    project: Project = project_of({"acme/runner.py": source})
    return NonDriverValues(project).held()


def test_the_entry_points_of_a_step() -> None:
    values = NonDriverValues(project_of({"acme/runner.py": LEGACY}))
    assert sorted(values.entries()) == [
        "ModelRunner.profile_run",
        "Worker.execute_model with ModelRunner",
    ]


def test_what_a_non_driver_rank_builds_on_each_entry() -> None:
    entry = "Worker.execute_model with ModelRunner"
    found = {(h.cls, h.keyword, h.value) for h in held(LEGACY) if h.entry == entry}
    # the driver's construction is not on the path
    assert found == {
        ("SamplingMetadata", "perform_sampling", "False"),
        ("SamplingMetadata", "seqs", "None"),
        ("SamplingMetadata", "*", "perform_sampling,seqs"),
    }
    # the driver flag is False on those ranks
    flagged = {(h.keyword, h.value) for h in held(FLAGGED) if h.entry == entry}
    assert ("perform_sampling", "False") in flagged


def test_a_rewrite_that_keeps_the_non_driver_flag_changes_nothing() -> None:
    assert changed_values(held(LEGACY), held(FLAGGED)) == []


def test_a_rewrite_that_leaves_the_flag_to_its_default_changes_it() -> None:
    changes = changed_values(held(LEGACY), held(DEFAULTED))
    assert {(c.entry, c.keyword, c.before, c.after) for c in changes} == {
        ("Worker.execute_model with ModelRunner", "perform_sampling", "False", DEFAULT),
        ("ModelRunner.profile_run", "perform_sampling", "False", DEFAULT),
    }
    assert changes[0].describe().startswith("at ")
    assert "SamplingMetadata(perform_sampling=False) before the rewrite" in changes[0].describe()
