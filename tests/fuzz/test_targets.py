"""Resolving targets: module:Class, modules and paths."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runnercheck.contract import VLLM
from runnercheck.errors import UsageError
from runnercheck.fuzz.targets import resolve, resolve_all


def test_module_class() -> None:
    [target] = resolve("tests.fuzz.fixtures.good:ModelInput", VLLM)
    assert target.name == "tests.fuzz.fixtures.good:ModelInput"


def test_module_finds_concrete_input_classes_defined_there() -> None:
    names = [t.name.split(":")[1] for t in resolve("tests.fuzz.fixtures.good", VLLM)]
    # the base raises NotImplementedError but is concrete: it is an input class too
    assert names == [
        "ModelRunnerInputBase",
        "ModelInput",
        "ModelInputWithSampling",
        "FlatAttentionInput",
    ]


def test_path_is_imported_under_its_package_name(tmp_path: Path) -> None:
    package = tmp_path / "engine_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "inputs.py").write_text(
        textwrap.dedent("""
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class StepInput:
            n: int = 0
            def as_broadcastable_tensor_dict(self):
                return {"n": self.n}
            @classmethod
            def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
                return cls(**tensor_dict)
        class NotInput:
            pass
    """)
    )
    [target] = resolve(str(package), VLLM)
    assert target.name == "engine_pkg.inputs:StepInput"
    assert target.sys_path == (str(tmp_path),)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module_xyz:Cls", "cannot import module 'no_such_module_xyz': no such module"),
        ("tests.fuzz.fixtures.good:Missing", "has no attribute 'Missing'"),
        ("tests.fuzz.fixtures.good:Phase", "not an input class"),
        ("tests.fuzz.fixtures", "defines no input class"),
        ("does/not/exist.py", "no such file or directory"),
    ],
)
def test_errors_name_the_target(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        resolve_all([spec], VLLM)
