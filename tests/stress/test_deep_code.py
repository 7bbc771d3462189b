"""Deeply nested code that CPython compiles is analysed by ``check`` and migrated by
``migrate``; what is nested deeper still is one finding for that file only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.cli import main
from tests.migrate.conftest import FIXTURES

ENGINE = FIXTURES / "engine" / "before"

#: name -> an expression nested close to CPython's default limit (it compiles).
DEEP = {
    "sum": " + ".join(["step"] * 2_900),
    "calls": "f" + "(step)" * 2_900,
    "attributes": "step" + ".x" * 2_900,
    "subscripts": "step" + "[0]" * 2_900,
    "method_chain": "step" + ".f()" * 1_400,
    "lists": "[" * 190 + "step" + "]" * 190,
    "not": "not " * 900 + "step",
    "conditional": " if step else ".join(["step"] * 1_400),
}


def source(expression: str) -> str:
    return (
        "from vllm.distributed import broadcast_tensor_dict\n\n\n"
        "def send(step, f=None):\n"
        f"    broadcast_tensor_dict({{'total': {expression}}}, src=0)\n"
    )


def test_every_case_compiles_under_cpythons_default_limits() -> None:
    """The cases are fair: a fresh interpreter compiles each of them."""
    code = (
        "import sys\nfor text in sys.stdin.read().split('\\0'):\n    compile(text, 'x', 'exec')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input="\0".join(source(e) for e in DEEP.values()),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_check_analyses_every_deep_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name, expression in DEEP.items():
        (tmp_path / f"{name}.py").write_text(source(expression))
    code = main(["check", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.strip().endswith(
        f"({len(DEEP)} files seen, {len(DEEP)} parsed, 0 skipped by the prefilter)."
    )


def test_migrate_rewrites_a_group_holding_deep_code_and_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report's case: a 1,900-term sum in the worker."""
    work = tmp_path / "engine"
    shutil.copytree(ENGINE, work)
    deep = "\n\ndef total(a):\n    return " + " + ".join(["a"] * 1_900) + "\n"
    worker = work / "worker.py"
    worker.write_text(worker.read_text() + deep)
    code = main(["migrate", str(work)])
    out = capsys.readouterr().out
    assert code == 0 and " MIG" not in out, out
    expected = (FIXTURES / "engine" / "after" / "worker.py").read_text()
    assert worker.read_text() == expected + deep


def test_code_deeper_than_cpython_compiles_is_one_refusal_for_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "engine"
    shutil.copytree(ENGINE, work)
    too_deep = work / "too_deep.py"
    too_deep.write_text(source(" + ".join(["step"] * 3_500)))
    code = main(["migrate", str(work)])
    out = capsys.readouterr().out
    refusals = [line for line in out.splitlines() if " MIG" in line or " RC0" in line]
    assert refusals == [
        f"{too_deep}: RC001 [parse] nested 3504 levels deep, deeper than CPython compiles "
        "by default (3000): not analysed"
    ]
    assert code == 1
    assert (work / "model_runner_base.py").exists()  # the rest of the tree was migrated
