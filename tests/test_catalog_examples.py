"""Every catalog example runs: a bad example produces exactly its code, a good one
nothing, for the rules of ``check``, the mypy plugin and the reasons of ``migrate``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from codemods.framework.pipeline import migrate
from runnercheck.catalog import Rule
from runnercheck.check import check_sources
from runnercheck.commands.rules import all_rules
from tests.mypy_plugin.mypy_run import mypy

#: Codes whose examples only illustrate, and why no runnable example can exist.
ILLUSTRATIVE = {
    "RC002": "an internal error of the checker",
    "RC206": "an internal error of the plugin",
    "RC003": "a half-applied migration: the state of a journal, not of source text",
    "MIG003": "a symbolic link: no source text can hold it",
    "MIG004": "a read-only file: a file mode, not source text",
    "MIG005": "a file changed during the run: a race, not source text",
    "MIG006": "a write that fails: the file system, not source text",
    "MIG007": "a run killed while writing: a journal, not source text",
    "MIG110": "a rewrite that fails verification is a bug of the codemods",
    "MIG111": "a rewrite that changes a non-driver value is a bug of the codemods "
    "(tests/migrate/test_equivalence.py plants one)",
    "MIG199": "an internal error of the planner",
}
#: The runtime validator's rules run as fuzz defect fixtures (tests/fuzz/fixtures).
FUZZ_COVERED_BY = "tests/fuzz/fixtures/defects.py"

_FILE = re.compile(r"^# file: (\S+)\n", re.M)


def files_of(example: str) -> dict[str, str]:
    """An example's files: ``# file: NAME`` lines separate them; else one ``example.py``."""
    parts = _FILE.split(example)
    if len(parts) == 1:
        return {"example.py": example}
    if parts[0].strip():
        raise ValueError("text before the first '# file:' line")
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def runnable(tool: str) -> list[Rule]:
    return [r for r in all_rules() if r.tool == tool and r.runnable]


def test_every_rule_has_runnable_examples_or_a_reason() -> None:
    for rule in all_rules():
        if rule.tool == "fuzz":
            assert not rule.runnable, rule.code
            assert (Path(__file__).parent.parent / FUZZ_COVERED_BY).is_file()
            continue
        assert rule.runnable == (rule.code not in ILLUSTRATIVE), rule.code


def test_files_of_splits_examples() -> None:
    assert files_of("x = 1\n") == {"example.py": "x = 1\n"}
    assert files_of("# file: a.py\nx = 1\n# file: pkg/b.py\ny = 2\n") == {
        "a.py": "x = 1\n",
        "pkg/b.py": "y = 2\n",
    }
    with pytest.raises(ValueError):
        files_of("oops\n# file: a.py\nx = 1\n")


# ------------------------------------------------------------------- check


@pytest.mark.parametrize("rule", runnable("check"), ids=lambda r: r.code)
def test_check_examples(rule: Rule) -> None:
    bad = check_sources(dict(files_of(rule.bad)))
    assert {f.code for f in bad.findings} == {rule.code}, bad.findings
    good = check_sources(dict(files_of(rule.good)))
    assert good.findings == []


# ------------------------------------------------------------------ plugin

#: What the plugin examples import: the contract's bases, as vLLM 0.5.1 declares them.
VLLM_BASES = """\
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, Generic, List, Optional, Type, TypeVar

T = TypeVar("T", bound="ModelRunnerInputBase")


@dataclass(frozen=True)
class ModelRunnerInputBase(ABC):
    @abstractmethod
    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def from_broadcasted_tensor_dict(
        cls: Type[T], tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> T: ...


class ModelRunnerBase(ABC, Generic[T]):
    @abstractmethod
    def make_model_input_from_broadcasted_tensor_dict(
        self, tensor_dict: Dict[str, Any]
    ) -> T: ...

    @abstractmethod
    def prepare_model_input(self, seq_group_metadata_list: List[Any]) -> T: ...

    @abstractmethod
    def execute_model(
        self, model_input: T, kv_caches: Optional[List[Any]]
    ) -> Optional[Any]: ...
"""

MYPY_INI = """\
[mypy]
plugins = mypy_plugin
python_version = 3.11
no_site_packages = True
"""
_MYPY_CODE = re.compile(r": error: .*\[([a-z-]+)\]$")


def plugin_codes(tmp_path: Path, example: str) -> set[str]:
    files = {"vllm/__init__.py": "", "vllm/worker/__init__.py": "", "mypy.ini": MYPY_INI}
    files["vllm/worker/model_runner_base.py"] = VLLM_BASES
    files.update(files_of(example))
    write(tmp_path, files)
    targets = [n for n in files if n.endswith(".py") and not n.startswith("vllm/")]
    proc = mypy(tmp_path, *targets)
    assert proc.stderr == ""
    return {m.group(1) for line in proc.stdout.splitlines() if (m := _MYPY_CODE.search(line))}


@pytest.mark.slow
@pytest.mark.parametrize("rule", runnable("mypy"), ids=lambda r: r.code)
def test_plugin_examples(rule: Rule, tmp_path: Path) -> None:
    assert plugin_codes(tmp_path / "bad", rule.bad) == {rule.name}
    assert plugin_codes(tmp_path / "good", rule.good) == set()


# ----------------------------------------------------------------- migrate


def refusal_codes(root: Path, example: str) -> set[str]:
    """The codes ``migrate`` reports on the example: its refusals, and a shape left alone
    that no codemod can fix (a note with the code, the fold's MIG204 where it cannot
    apply)."""
    write(root, files_of(example))
    result = migrate([root])
    return {refused.code for refused in result.refusals} | {n.code for n in result.notes if n.code}


@pytest.mark.parametrize("rule", runnable("migrate"), ids=lambda r: r.code)
def test_migrate_examples(rule: Rule, tmp_path: Path) -> None:
    assert refusal_codes(tmp_path / "bad", rule.bad) == {rule.code}
    assert refusal_codes(tmp_path / "good", rule.good) == set()
