"""The class hierarchy (:mod:`runnercheck.analysis.hierarchy`): classes named across
modules (absolute, relative and aliased imports), the C3 MRO, method lookup along it
(``super()`` starts after the caller's class), module-level functions, dataclass
fields and driver-only declarations."""

from __future__ import annotations

from runnercheck.analysis.hierarchy import module_parts
from runnercheck.analysis.model import ClassFacts
from tests.analysis.sources import class_named, project_of

#: The C3 example of Python's own documentation ("The Python 2.3 Method Resolution
#: Order"): a depth-first, left-to-right walk gives another order.
C3_EXAMPLE = """\
class O: pass
class A(O): pass
class B(O): pass
class C(O): pass
class D(O): pass
class E(O): pass
class K1(A, B, C): pass
class K2(D, B, E): pass
class K3(D, A): pass
class Z(K1, K2, K3): pass
"""


def names(classes: list[ClassFacts]) -> list[str]:
    return [c.name for c in classes]


def test_the_mro_is_c3_not_depth_first() -> None:
    project = project_of({"acme/c3.py": C3_EXAMPLE})
    z = class_named(project, "Z")
    assert names(project.hierarchy.mro(z)) == ["Z", "K1", "K2", "K3", "D", "A", "B", "C", "E", "O"]


def test_a_diamond_visits_the_shared_base_last() -> None:
    project = project_of(
        {
            "acme/diamond.py": """\
            class Base:
                def step(self): ...
            class Left(Base):
                def step(self): ...
            class Right(Base):
                def step(self): ...
            class Both(Left, Right):
                pass
            """
        }
    )
    both = class_named(project, "Both")
    assert names(project.hierarchy.mro(both)) == ["Both", "Left", "Right", "Base"]
    ref = project.hierarchy.resolve_method(both, "step")
    assert ref is not None and ref.owner.name == "Left"
    # ``super().step()`` in Left, on a Both, is Right's (the next class of Both's MRO)
    left = class_named(project, "Left")
    after_left = project.hierarchy.resolve_method(both, "step", after=left)
    assert after_left is not None and after_left.owner.name == "Right"
    right = class_named(project, "Right")
    after_right = project.hierarchy.resolve_method(both, "step", after=right)
    assert after_right is not None and after_right.owner.name == "Base"
    assert project.hierarchy.resolve_method(both, "missing") is None


def test_classes_outside_the_tree_are_left_out_of_the_mro_and_named_as_ancestors() -> None:
    project = project_of(
        {
            "acme/outside.py": """\
            from abc import ABC
            from torch.nn import Module
            class Runner(Module, ABC):
                pass
            class GPURunner(Runner):
                pass
            """
        }
    )
    gpu = class_named(project, "GPURunner")
    assert names(project.hierarchy.mro(gpu)) == ["GPURunner", "Runner"]
    assert project.hierarchy.ancestor_names(gpu) == {"Runner", "Module"}  # ABC is neutral
    assert project.hierarchy.unresolved_bases(gpu) == {"Module"}
    assert project.hierarchy.inherits(gpu, ["Module"]) and not project.hierarchy.inherits(
        gpu, ["ABC"]
    )


SPLIT_PACKAGE = {
    "acme/__init__.py": "",
    "acme/worker/__init__.py": "",
    "acme/worker/base.py": """\
    class WorkerBase:
        def execute_model(self): ...
    """,
    "acme/worker/gpu_worker.py": """\
    from .base import WorkerBase
    from ..runner import runner_base as rb
    from acme.runner.gpu_runner import GPURunner as Runner

    class GPUWorker(WorkerBase):
        def __init__(self):
            self.model_runner = Runner()

    class Pinned(rb.RunnerBase):
        pass
    """,
    "acme/runner/__init__.py": "",
    "acme/runner/runner_base.py": """\
    class RunnerBase:
        def execute_model(self): ...
    """,
    "acme/runner/gpu_runner.py": """\
    from acme.runner.runner_base import RunnerBase
    from .helpers import build

    class GPURunner(RunnerBase):
        def execute_model(self):
            return build()
    """,
    "acme/runner/helpers.py": """\
    def build():
        return 1
    """,
    # a namesake of the worker base in another package: never the one imported
    "other/base.py": """\
    class WorkerBase:
        pass
    """,
}


def test_a_class_is_resolved_across_modules_through_relative_absolute_and_aliased_imports() -> None:
    project = project_of(SPLIT_PACKAGE)
    worker_path = "acme/worker/gpu_worker.py"
    base = project.hierarchy.resolve_class("WorkerBase", worker_path)
    assert base is not None and base.path == "acme/worker/base.py"
    runner = project.hierarchy.resolve_class("Runner", worker_path)  # ``import ... as Runner``
    assert runner is not None and (runner.name, runner.path) == (
        "GPURunner",
        "acme/runner/gpu_runner.py",
    )
    dotted = project.hierarchy.resolve_class("rb.RunnerBase", worker_path)  # a module alias
    assert dotted is not None and dotted.path == "acme/runner/runner_base.py"
    pinned = class_named(project, "Pinned")
    assert names(project.hierarchy.mro(pinned)) == ["Pinned", "RunnerBase"]
    assert project.hierarchy.resolve_class("Nowhere", worker_path) is None


def test_a_function_is_resolved_through_a_relative_import() -> None:
    project = project_of(SPLIT_PACKAGE)
    build = project.hierarchy.resolve_function("build", "acme/runner/gpu_runner.py")
    assert build is not None and build.path == "acme/runner/helpers.py"


def test_module_files_and_dotted_names() -> None:
    project = project_of(SPLIT_PACKAGE)
    hierarchy = project.hierarchy
    origin = "acme/worker/gpu_worker.py"
    assert hierarchy.module_file(origin, "base", 1) == "acme/worker/base.py"
    assert hierarchy.module_file(origin, "runner.helpers", 2) == "acme/runner/helpers.py"
    assert hierarchy.module_file(origin, "runner", 2) == "acme/runner/__init__.py"
    assert hierarchy.module_file(origin, "acme.runner.gpu_runner", 0) == (
        "acme/runner/gpu_runner.py"
    )
    # absolutely, ``base`` is never acme.worker.base; a loose file outside every
    # package is named by its stem wherever it is imported from
    assert hierarchy.module_file(origin, "base", 0) == "other/base.py"
    assert hierarchy.module_file(origin, "worker.base", 0) is None
    assert hierarchy.module_file(origin, "missing", 1) is None
    assert hierarchy.dotted_name("acme/runner/helpers.py") == ("acme", "runner", "helpers")
    assert hierarchy.dotted_name("other/base.py") == ("base",)  # outside every package
    assert module_parts("acme/runner/__init__.py") == ("acme", "runner")


def test_an_unread_module_of_the_package_is_not_a_namesake_elsewhere() -> None:
    """``from .missing import WorkerBase``: the analysed package's module was not read,
    so the class is unknown, not ``other/base.py``'s ``WorkerBase``."""
    project = project_of(
        {
            "acme/__init__.py": "",
            "acme/worker.py": "from .missing import WorkerBase\nclass W(WorkerBase): pass\n",
            "other/base.py": "class WorkerBase: pass\n",
        }
    )
    assert project.hierarchy.resolve_class("WorkerBase", "acme/worker.py") is None
    w = class_named(project, "W")
    assert project.hierarchy.direct_bases(w) == ["WorkerBase"]


def test_dataclass_fields_are_inherited_and_unknown_with_an_unread_base() -> None:
    project = project_of(
        {
            "acme/inputs.py": """\
            from dataclasses import dataclass, field
            from typing import ClassVar, Optional
            from vllm.sequence import Unknown

            DRIVER_ONLY = {"driver_only": True}

            @dataclass
            class Base:
                tokens: list
                kind: ClassVar[str] = "base"

            @dataclass
            class Child(Base):
                # Driver-only: not broadcast.
                seq_lens: Optional[list] = None
                positions: Optional[list] = field(default=None, metadata=DRIVER_ONLY)
                tokens: list = field(default_factory=list)

            @dataclass
            class Elsewhere(Unknown):
                x: int = 0
            """
        }
    )
    child = class_named(project, "Child")
    fields = project.hierarchy.dataclass_fields(child)
    assert fields is not None
    assert list(fields) == ["tokens", "seq_lens", "positions"]  # ClassVar is no field
    assert fields["tokens"][0].name == "Child"  # the override wins
    driver_only = {
        name for name, (k, f) in fields.items() if project.hierarchy.is_driver_only(k, f)
    }
    assert driver_only == {"seq_lens", "positions"}
    assert project.hierarchy.dataclass_fields(class_named(project, "Elsewhere")) is None
    assert project.hierarchy.unknown_bases(class_named(project, "Elsewhere")) == {"Unknown"}


def test_a_marker_constant_imported_from_another_module_declares_driver_only() -> None:
    project = project_of(
        {
            "acme/__init__.py": "",
            "acme/markers.py": 'NOT_SENT = {"driver_only": True}\nSENT = {"other": 1}\n',
            "acme/inputs.py": """\
            from dataclasses import dataclass, field
            from .markers import NOT_SENT, SENT

            @dataclass
            class Input:
                a: int = field(default=0, metadata=NOT_SENT)
                b: int = field(default=0, metadata=SENT)
            """,
        }
    )
    cls = class_named(project, "Input")
    fields = project.hierarchy.dataclass_fields(cls)
    assert fields is not None
    assert [n for n, (k, f) in fields.items() if project.hierarchy.is_driver_only(k, f)] == ["a"]


def test_defines_finds_methods_and_class_attributes_along_the_mro() -> None:
    project = project_of(
        {
            "acme/attrs.py": """\
            class Base:
                do_metadata_broadcast = True
                def run(self): ...
            class Child(Base):
                def run(self): ...
            """
        }
    )
    child = class_named(project, "Child")
    assert project.hierarchy.defines(child, "do_metadata_broadcast") is class_named(project, "Base")
    assert project.hierarchy.defines(child, "run") is child
    assert project.hierarchy.defines(child, "other") is None


def test_a_cycle_of_bases_ends() -> None:
    """Code no interpreter runs (each class the other's base): the walk still ends."""
    project = project_of({"acme/cycle.py": "class A(B): pass\nclass B(A): pass\n"})
    a = class_named(project, "A")
    assert names(project.hierarchy.mro(a))[:2] == ["A", "B"]
    assert project.hierarchy.ancestor_names(a) == {"A", "B"}


def test_a_class_named_through_a_module_imported_from_its_package() -> None:
    project = project_of(
        {
            "acme/__init__.py": "",
            "acme/worker/__init__.py": "",
            "acme/worker/base.py": "class WorkerBase:\n    pass\n",
            "acme/worker/gpu.py": "from . import base\nclass GPUWorker(base.WorkerBase):\n    pass\n",
        }
    )
    base = project.hierarchy.resolve_class("base.WorkerBase", "acme/worker/gpu.py")
    assert base is not None and base.path == "acme/worker/base.py"
