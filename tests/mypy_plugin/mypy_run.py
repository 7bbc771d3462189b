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


def _entry(module: str) -> list[str]:
    """Run ``module``'s console entry point without the working directory on
    ``sys.path`` (like the installed ``mypy`` script): a fixture's own packages must
    not shadow the plugin's imports."""
    code = f"import sys; sys.path.pop(0); from {module} import console_entry; console_entry()"
    return [sys.executable, "-c", code]


def mypy(cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """mypy ARGS in ``cwd`` with a cache under ``cwd``."""
    cmd = [*_entry("mypy.__main__"), "--cache-dir", str(cwd / ".mypy_cache"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def patched_mypy(cwd: Path, patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Real mypy in a fresh interpreter after ``patch`` (Python source) ran."""
    code = (
        f"import sys\nsys.path.pop(0)\n{patch}\nfrom mypy.main import main\n"
        "sys.argv = ['mypy', *sys.argv[1:]]\nmain()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, "--cache-dir", str(cwd / ".mypy_cache"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(),
    )


def dmypy(
    cwd: Path, status_file: Path, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    cmd = [*_entry("mypy.dmypy.client"), "--status-file", str(status_file), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def normalise(text: str, root: Path) -> str:
    """Paths under ``root`` printed relative to it (the only normalisation)."""
    return text.replace(str(root) + os.sep, "").replace(str(root), ".")
