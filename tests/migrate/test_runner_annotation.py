"""The worker's runner attribute and the local holding the class it picks are typed
with the runners' generic base; nothing else is touched."""

from __future__ import annotations

import libcst as cst

from codemods.merge_broadcasts.generic_base import annotate_runner_attribute

BEFORE = """\
class Worker:
    def __init__(self, config):
        RunnerClass = PoolingRunner if config.pooling else Runner
        self.model_runner = RunnerClass(config)

    def other(self):
        RunnerClass = make_class()
        return RunnerClass
"""

AFTER = """\
class Worker:
    def __init__(self, config):
        RunnerClass: Type[GenericRunner] = Runner
        if config.pooling:
            RunnerClass = PoolingRunner
        self.model_runner: GenericRunner = RunnerClass(config)

    def other(self):
        RunnerClass = make_class()
        return RunnerClass
"""


def _annotate(source: str) -> tuple[str, bool, bool]:
    module = cst.parse_module(source)
    cdef = module.body[0]
    assert isinstance(cdef, cst.ClassDef)
    new, changed, typed = annotate_runner_attribute(
        cdef, "model_runner", "GenericRunner", {"Runner", "PoolingRunner"}
    )
    return module.with_changes(body=[new]).code, changed, typed


def test_the_picked_class_is_typed_in_its_own_method_only() -> None:
    assert _annotate(BEFORE) == (AFTER, True, True)


def test_a_runner_built_from_one_class_is_left_alone() -> None:
    source = "class Worker:\n    def __init__(self, config):\n        self.model_runner = Runner(config)\n"
    assert _annotate(source) == (source, False, False)
