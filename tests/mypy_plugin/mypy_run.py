"""Running real mypy (and dmypy) with the plugin on fixture copies."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
EXPECTED = HERE / "expected"
REPO = HERE.parent.parent


def copy_fixture(name: str, dest: Path) -> Path:
    """A fresh copy of ``fixtures/<name>`` under ``dest`` (mypy runs there, not in the
    repository, so caches and the package layout of tests/ stay out of the way)."""
    target = dest / name
    shutil.copytree(FIXTURES / name, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def expected(name: str) -> str:
    return (EXPECTED / name).read_text(encoding="utf-8")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MYPY")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def mypy(cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python -m mypy ARGS`` in ``cwd`` with a cache under ``cwd``."""
    cmd = [sys.executable, "-m", "mypy", "--cache-dir", str(cwd / ".mypy_cache"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def dmypy(
    cwd: Path, status_file: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status_file), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def normalise(text: str, root: Path) -> str:
    """Paths under ``root`` printed relative to it (the only normalisation)."""
    return text.replace(str(root) + os.sep, "").replace(str(root), ".")
