"""The merged dict (:mod:`runnercheck.analysis.merged`): the step that sends one dict
for several parts, the parts the other ranks rebuild from it in order, the keys alive
at each ``cls(**d)`` (delivered), and a key no constructor accepts (a leak).

The engine is the one of ``tests/check/test_merged_delivery.py`` (where ``check``'s
RC103 reads it), with the worker input's read of one key as given."""

from __future__ import annotations

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.merged import MergedStep
from runnercheck.analysis.project import Project
from tests.analysis.sources import class_named
from tests.check.test_merged_delivery import SOURCE

KEEPS = 'tensor_dict["virtual_engine"]'
POPS = 'tensor_dict.pop("virtual_engine")'


def project(read: str, source: str = SOURCE) -> Project:
    return Project([extract_source(source.format(read=read), "acme/accel.py")])


def step_of(p: Project) -> MergedStep:
    step = p.merged.merged_step(class_named(p, "AccelWorker"), class_named(p, "AccelModelRunner"))
    assert step is not None
    return step


def test_the_send_the_receive_and_the_parts_in_order() -> None:
    p = project(KEEPS)
    step = step_of(p)
    assert step.send.func.qualname == step.receive.func.qualname == "AccelWorker.execute_model"
    assert [c.name for c in step.parts] == ["WorkerInput", "ModelInputForAccelWithSampling"]
    assert [(s.worker.name, s.runner and s.runner.name) for s in p.merged.merged_steps()] == [
        ("AccelWorker", "AccelModelRunner")
    ]


def test_a_key_read_without_pop_reaches_the_next_part_s_constructor() -> None:
    p = project(KEEPS)
    sampling = class_named(p, "ModelInputForAccelWithSampling")
    assert step_of(p).delivered[id(sampling)] == {"input_tokens", "sampling", "virtual_engine"}
    # a base only built through its subclass gets what the subclass is delivered
    assert p.merged.delivered_keys(class_named(p, "ModelInputForAccel")) == {
        "input_tokens",
        "sampling",
        "virtual_engine",
    }
    assert "virtual_engine" in p.merged.offered_keys(sampling)
    # its own dict never carries the field, but the worker input's key delivers it
    assert p.merged.unbroadcast_fields(class_named(p, "ModelInputForAccel")) == []
    assert step_of(p).leaks == []  # the subclass inherits the field: it accepts the key


def test_a_popped_key_is_not_delivered() -> None:
    p = project(POPS)
    sampling = class_named(p, "ModelInputForAccelWithSampling")
    assert step_of(p).delivered[id(sampling)] == {"input_tokens", "sampling"}
    assert [f.name for f in p.merged.unbroadcast_fields(class_named(p, "ModelInputForAccel"))] == [
        "virtual_engine"
    ]


def test_a_key_no_constructor_accepts_leaks() -> None:
    """``num_seq_groups`` read without pop reaches ``cls(**d)`` of a class with no
    such field: a TypeError on every other rank."""
    source = SOURCE.replace(
        'num_seq_groups=tensor_dict.pop("num_seq_groups")',
        'num_seq_groups=tensor_dict["num_seq_groups"]',
    )
    p = project(POPS, source)
    (leak,) = step_of(p).leaks
    assert leak.origin.key == "num_seq_groups" and leak.origin.part == "WorkerInput"
    assert leak.origin.read_without_pop is not None
    assert leak.target.name == "ModelInputForAccelWithSampling"
    assert leak.step == "AccelWorker.execute_model"
