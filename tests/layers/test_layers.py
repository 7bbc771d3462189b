"""The declared layering holds, and `lint-imports` catches a planted violation."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


def copy_tree(dest: Path) -> Path:
    for package in ("runnercheck", "codemods", "mypy_plugin"):
        shutil.copytree(
            REPO / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_layers_are_kept(tmp_path: Path) -> None:
    declared = (REPO / "pyproject.toml").read_text().count("\n[[tool.importlinter.contracts]]\n")
    assert declared >= 2
    proc = lint_imports(copy_tree(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{declared} kept, 0 broken" in proc.stdout


def test_a_planted_violation_breaks_the_contract(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    model = root / "runnercheck" / "analysis" / "model.py"
    model.write_text(model.read_text() + "\nimport runnercheck.check.pipeline  # noqa\n")
    proc = lint_imports(root)
    assert proc.returncode == 1
    assert "runnercheck.analysis is not allowed to import runnercheck.check" in proc.stdout


def test_check_importing_what_only_migrate_reads_breaks_the_contract(tmp_path: Path) -> None:
    root = copy_tree(tmp_path)
    pipeline = root / "runnercheck" / "check" / "pipeline.py"
    pipeline.write_text(pipeline.read_text() + "\nimport codemods.facts.values  # noqa\n")
    proc = lint_imports(root)
    assert proc.returncode == 1
    assert "runnercheck.check.pipeline -> codemods.facts.values" in proc.stdout, proc.stdout
