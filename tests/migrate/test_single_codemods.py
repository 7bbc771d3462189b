"""self-return, driver-only and super-dict: golden files, refusals, and the same
commands run by LibCST's own ``python -m libcst.tool codemod``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst

from codemods import self_return
from tests.migrate.conftest import FIXTURES, snapshot

SINGLE = FIXTURES / "single"
REPO = Path(__file__).resolve().parents[2]


def _copy(tmp_path: Path) -> Path:
    work = tmp_path / "inputs"
    work.mkdir()
    for name in ("inputs", "self_typed"):
        shutil.copy(SINGLE / f"{name}_before.py", work / f"{name}.py")
    return work


def test_all_single_codemods_match_the_golden_files(tmp_path: Path, migrate_cli) -> None:
    work = _copy(tmp_path)
    result = migrate_cli(str(work))
    assert result.code == 1
    assert (work / "inputs.py").read_bytes() == (SINGLE / "inputs_after.py").read_bytes()
    # (the directory names no formatter and its files follow ruff format's layout:
    # the rewritten lines take it, where the LibCST command below keeps 80 columns)
    golden = (SINGLE / "self_typed_after.py").read_text()
    laid_out = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", "88", "-"],
        input=golden, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    assert laid_out != golden
    assert (work / "self_typed.py").read_text() == laid_out
    # the drifted copy is reported, not rewritten
    assert "MIG203 [super-dict] DriftedStepInput re-lists 1 of StepInput's 2 keys" in result.out
    again = snapshot(work)
    assert migrate_cli(str(work)).code == 1  # the drifted copy is still reported ...
    assert snapshot(work) == again  # ... and nothing changes


def test_select_runs_only_the_named_codemods(tmp_path: Path, migrate_cli) -> None:
    work = _copy(tmp_path)
    assert migrate_cli("--select", "self-return", str(work)).code == 0
    text = (work / "inputs.py").read_text()
    assert "-> TStepInput:" in text and "return cls(**tensor_dict)" in text
    assert "driver-only" not in text and "super()" not in text


def test_self_return_prefers_self_when_the_module_imports_it() -> None:
    module = cst.parse_module((SINGLE / "self_typed_before.py").read_text())
    new, changed = self_return.rewrite_module(module)
    assert changed == ["PlainInput"]
    assert ") -> Self:" in new.code and "TypeVar" not in new.code
    assert "cls, tensor_dict" in new.code  # no explicit cls annotation next to Self


def test_libcst_tool_runs_the_commands_on_single_files(tmp_path: Path) -> None:
    work = _copy(tmp_path)
    target = work / "self_typed.py"
    proc = subprocess.run(
        [
            sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format",
            "codemods.self_return.SelfReturnCommand", str(target),
        ],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == (SINGLE / "self_typed_after.py").read_bytes()
    proc = subprocess.run(
        [
            sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format",
            "codemods.super_dict.SuperDictCommand", str(work / "inputs.py"),
        ],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (work / "inputs.py").read_text()
    assert "tensor_dict = super().as_broadcastable_tensor_dict()" in text
    assert "MIG203" in proc.stderr  # the drifted copy, as a codemod warning


def test_libcst_tool_merges_a_group_that_lives_in_one_file(tmp_path: Path) -> None:
    target = tmp_path / "whole_group.py"
    shutil.copy(SINGLE / "whole_group_before.py", target)
    proc = subprocess.run(
        [
            sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format",
            "codemods.merge_broadcasts.MergeBroadcastsCommand", str(target),
        ],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == (SINGLE / "whole_group_after.py").read_bytes()
    # a worker whose runner lives in another file: the single-file command cannot see
    # it and leaves the file alone (``runnercheck migrate`` plans across files)
    engine = tmp_path / "engine"
    shutil.copytree(FIXTURES / "engine" / "before", engine)
    worker = engine / "cpu_worker.py"
    before = worker.read_bytes()
    proc = subprocess.run(
        [
            sys.executable, "-m", "libcst.tool", "codemod", "-x", "--no-format",
            "codemods.merge_broadcasts.MergeBroadcastsCommand", str(worker),
        ],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert worker.read_bytes() == before
    assert "MIG103" in proc.stderr
