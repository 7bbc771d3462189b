"""Measure the environment real ``pre-commit`` builds for runnercheck's hooks.

For this checkout at its HEAD commit (``repo:`` a path, ``rev:`` the SHA, as
docs/examples/pre-commit-config.yaml says), in a fresh ``PRE_COMMIT_HOME``: the wall time
of ``pre-commit install-hooks`` and the size of the environment it made, whether torch
is in it, and the same with the fuzz extra's packages added as ``additional_dependencies``
(what every hook environment held when torch was a hard dependency), in the same run.

Usage::

    python benchmarks/bench_hook_env.py [--no-pip-cache] [--json out.json]

``--no-pip-cache`` sets ``PIP_NO_CACHE_DIR=1`` for the installs (every wheel fetched from
the package index again); by default pip's cache is used as a developer's machine would.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FUZZ_EXTRA = '["torch==2.13.0", "numpy>=1.24", "hypothesis>=6.100"]'


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def size_mb(path: Path) -> float:
    total = sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())
    return total / 1e6


def measure(root: Path, rev: str, extra: str | None, no_cache: bool) -> dict[str, object]:
    project = root / "project"
    project.mkdir()
    config = (
        f"repos:\n  - repo: {REPO}\n    rev: {rev}\n    hooks:\n      - id: runnercheck-check\n"
    )
    if extra is not None:
        config += f"        additional_dependencies: {extra}\n"
    (project / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "config")
    home = root / "pre-commit-home"
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    if no_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    start = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / "pre-commit"), "install-hooks"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bench_hook_env: pre-commit install-hooks failed: {proc.stderr[-500:]}")
    (python,) = home.glob("repo*/py_env-*/bin/python")
    probe = "import importlib.util as u; print(u.find_spec('torch') is not None)"
    has_torch = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, timeout=120, check=True
    ).stdout.strip()
    return {
        "install_s": seconds,
        "env_mb": size_mb(python.parent.parent),
        "torch": has_torch == "True",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--no-pip-cache", action="store_true", help="PIP_NO_CACHE_DIR=1")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    rev = git(REPO, "rev-parse", "HEAD")
    figures: dict[str, object] = {"rev": rev, "pip_cache": not args.no_pip_cache}
    for label, extra in (("hooks", None), ("hooks_with_fuzz_extra", FUZZ_EXTRA)):
        with tempfile.TemporaryDirectory(prefix="bench-hook-env-") as tmp:
            figures[label] = measure(Path(tmp), rev, extra, args.no_pip_cache)
    hooks, fuzz = figures["hooks"], figures["hooks_with_fuzz_extra"]
    assert isinstance(hooks, dict) and isinstance(fuzz, dict)
    cache = "without pip's cache" if args.no_pip_cache else "with pip's cache"
    print(f"pre-commit install-hooks for runnercheck-check at {rev[:12]}, {cache}:")
    for name, row in (("hooks as shipped", hooks), ("+ fuzz extra (baseline)", fuzz)):
        print(
            f"  {name:24s} {row['install_s']:6.1f} s  {row['env_mb']:7.1f} MB  "
            f"torch: {'yes' if row['torch'] else 'no'}"
        )
    print(
        f"  shipped / baseline: time {hooks['install_s'] / fuzz['install_s']:.2f}x, "
        f"size {hooks['env_mb'] / fuzz['env_mb']:.2f}x"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
