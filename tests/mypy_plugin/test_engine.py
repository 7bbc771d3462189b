"""The engine runnercheck ships, in its merged shape: clean with the plugin, and each
one-defect variant (a copy with its text mutated) fails with the exact message."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.mypy_plugin.mypy_run import REPO, mypy

ENGINE = REPO / "runnercheck" / "demo" / "engine"
MERGED = "runnercheck/demo/engine/merged"
MYPY_INI = """\
[mypy]
plugins = mypy_plugin
python_version = 3.11
no_site_packages = True
ignore_missing_imports = True
follow_imports = silent
"""
PLUGIN_CODES = re.compile(
    r"\[(runner-input-protocol|from-dict-fixed-return|runner-input-covariance|"
    r"execute-input-mismatch|unbroadcastable-value|runnercheck-internal|runner-input-unbound)\]$"
)


def engine_copy(tmp_path: Path) -> Path:
    """``runnercheck/demo/engine`` under ``tmp_path`` with the package path it imports by."""
    root = tmp_path / "project"
    (root / "runnercheck" / "demo").mkdir(parents=True)
    (root / "runnercheck" / "__init__.py").write_text("")
    shutil.copy(ENGINE.parent / "__init__.py", root / "runnercheck" / "demo" / "__init__.py")
    shutil.copytree(
        ENGINE,
        root / "runnercheck" / "demo" / "engine",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (root / "mypy.ini").write_text(MYPY_INI)
    return root


def test_merged_engine_is_clean(tmp_path: Path) -> None:
    root = engine_copy(tmp_path)
    count = len(list((root / MERGED).glob("*.py")))
    proc = mypy(root, MERGED)
    assert (proc.stdout, proc.stderr, proc.returncode) == (
        f"Success: no issues found in {count} source files\n",
        "",
        0,
    )


@dataclass(frozen=True)
class Edit:
    file: str
    old: str
    new: str


@dataclass(frozen=True)
class Expected:
    """A plugin error at the line of ``anchor`` (unique in the mutated file)."""

    file: str
    anchor: str
    message: str


@dataclass(frozen=True)
class Variant:
    name: str
    edits: tuple[Edit, ...]
    expected: tuple[Expected, ...]


VARIANTS = (
    Variant(
        "fixed-return",
        (
            Edit(
                "model_runner.py",
                "        cls: Type[TModelInputForGPUWithSamplingMetadata],\n",
                "        cls,\n",
            ),
            Edit(
                "model_runner.py",
                "    ) -> TModelInputForGPUWithSamplingMetadata:\n",
                '    ) -> "ModelInputForGPUWithSamplingMetadata":\n',
            ),
        ),
        (
            Expected(
                "model_runner.py",
                "    def from_broadcasted_tensor_dict(\n        cls,\n",
                '"ModelInputForGPUWithSamplingMetadata.from_broadcasted_tensor_dict" returns '
                'the fixed class "ModelInputForGPUWithSamplingMetadata"; declare "-> Self" (or '
                'a TypeVar bound by "cls") so subclasses need no cast()  [from-dict-fixed-return]',
            ),
        ),
    ),
    Variant(
        "staticmethod-from-dict",
        (
            Edit(
                "cpu_model_runner.py",
                "    @classmethod\n    def from_broadcasted_tensor_dict(\n"
                "        cls: Type[TCPUModelInput],\n",
                "    @staticmethod\n    def from_broadcasted_tensor_dict(\n",
            ),
            Edit(
                "cpu_model_runner.py", "    ) -> TCPUModelInput:\n", '    ) -> "CPUModelInput":\n'
            ),
            Edit(
                "cpu_model_runner.py",
                "        return cls(**tensor_dict)\n",
                "        return CPUModelInput(**tensor_dict)\n",
            ),
        ),
        (
            Expected(
                "cpu_model_runner.py",
                "class CPUModelRunner(",
                'Input type "CPUModelInput" of runner "CPUModelRunner": '
                '"CPUModelInput.from_broadcasted_tensor_dict" is a staticmethod, not a '
                "classmethod  [runner-input-protocol]",
            ),
        ),
    ),
    Variant(
        "lambda-value",
        (
            Edit(
                "model_runner.py",
                '            "virtual_engine": self.virtual_engine,\n        }\n'
                "        _add_attn_metadata_broadcastable_dict(",
                '            "virtual_engine": self.virtual_engine,\n'
                '            "sampler": lambda logits: logits.argmax(-1),\n        }\n'
                "        _add_attn_metadata_broadcastable_dict(",
            ),
        ),
        (
            Expected(
                "model_runner.py",
                '"sampler": lambda',
                'Value for key "sampler" in the dict of "ModelInputForGPU.as_broadcastable_'
                'tensor_dict" cannot be broadcast: its type "Callable[[Any], Any]" is a '
                "function  [unbroadcastable-value]",
            ),
        ),
    ),
    Variant(
        "loose-prepare",
        (
            Edit(
                "model_runner_base.py",
                "        finished_requests_ids: Optional[List[str]] = None,\n    ) -> T:\n",
                "        finished_requests_ids: Optional[List[str]] = None,\n"
                '    ) -> "ModelRunnerInputBase":\n',
            ),
            Edit(
                "cpu_model_runner.py",
                "        finished_requests_ids: Optional[List[str]] = None,\n"
                "    ) -> CPUModelInput:\n",
                "        finished_requests_ids: Optional[List[str]] = None,\n"
                "    ) -> ModelRunnerInputBase:\n",
            ),
        ),
        (
            Expected(
                "cpu_model_runner.py",
                "    def prepare_model_input(",
                '"CPUModelRunner.prepare_model_input" returns "ModelRunnerInputBase", which is '
                'not the runner\'s input type "CPUModelInput"  [runner-input-covariance]',
            ),
        ),
    ),
    Variant(
        "execute-mismatch",
        (
            Edit(
                "model_runner_base.py", "        model_input: T,\n", "        model_input: Any,\n"
            ),
            Edit(
                "cpu_model_runner.py",
                "        model_input: CPUModelInput,\n",
                "        model_input: TinyAttentionMetadata,\n",
            ),
        ),
        (
            Expected(
                "cpu_model_runner.py",
                "    def execute_model(",
                '"CPUModelRunner.execute_model" takes model_input: "TinyAttentionMetadata", '
                'which does not accept the runner\'s input type "CPUModelInput"  '
                "[execute-input-mismatch]",
            ),
        ),
    ),
)


def line_of(text: str, anchor: str) -> int:
    assert text.count(anchor) == 1, f"anchor {anchor!r} is not unique"
    return text[: text.index(anchor)].count("\n") + 1


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_defect_variant_reports_exact_message(tmp_path: Path, variant: Variant) -> None:
    root = engine_copy(tmp_path)
    merged = root / MERGED
    for edit in variant.edits:
        path = merged / edit.file
        text = path.read_text(encoding="utf-8")
        assert text.count(edit.old) == 1, f"{edit.old!r} not found once in {edit.file}"
        path.write_text(text.replace(edit.old, edit.new), encoding="utf-8")
    want = [
        f"{MERGED}/{e.file}:{line_of((merged / e.file).read_text(), e.anchor)}: error: {e.message}"
        for e in variant.expected
    ]
    proc = mypy(root, MERGED)
    got = [line for line in proc.stdout.splitlines() if PLUGIN_CODES.search(line)]
    assert got == want, proc.stdout
    assert proc.returncode == 1 and proc.stderr == ""
