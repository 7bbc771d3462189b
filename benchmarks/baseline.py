"""The "before" of a benchmark: an earlier commit of runnercheck, run beside this tree.

``baseline_tree(REF)`` unpacks the packages of ``REF`` (``git archive``, default: where
this branch left ``main``) into a temporary directory; ``command(tree, args)`` runs
``runnercheck ARGS`` from either tree with the same interpreter and environment (the
tree first on ``PYTHONPATH``), so that before and after are measured in one run,
interleaved, on the same machine state. Both trees are byte-compiled first, as an
installed package is.
"""

from __future__ import annotations

import compileall
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("runnercheck", "codemods", "mypy_plugin")


def default_ref() -> str:
    """The commit this branch started from on ``main`` (``HEAD`` when there is no main)."""
    proc = subprocess.run(
        ["git", "merge-base", "HEAD", "main"], cwd=REPO, capture_output=True, text=True
    )
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "HEAD"


def baseline_tree(ref: str, into: Path) -> Path:
    """The packages of ``ref`` unpacked under ``into`` (byte-compiled); returns ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, *PACKAGES], cwd=REPO, capture_output=True
    )
    if archive.returncode != 0:
        raise SystemExit(f"baseline: git archive {ref}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    compile_tree(into)
    return into


def before_and_after(ref: str, tmp: str | Path, copy_after: bool = False) -> dict[str, Path]:
    """The two trees of a side-by-side measurement: ``ref``'s packages unpacked under
    ``tmp`` ("before") and this checkout ("after"), both byte-compiled. ``copy_after``:
    this checkout's packages (as they are, uncommitted changes too) copied under ``tmp``
    beside the other, so that both sides are laid out and compiled alike."""
    before = Path(tmp) / "before"
    before.mkdir()
    baseline_tree(ref, before)
    if not copy_after:
        compile_tree(REPO)
        return {"before": before, "after": REPO}
    after = Path(tmp) / "after"
    for package in PACKAGES:
        if (REPO / package).is_dir():
            shutil.copytree(
                REPO / package, after / package, ignore=shutil.ignore_patterns("__pycache__")
            )
    compile_tree(after)
    return {"before": before, "after": after}


def compile_tree(tree: Path) -> None:
    for package in PACKAGES:
        if (tree / package).is_dir():
            compileall.compile_dir(str(tree / package), quiet=1, workers=1)


def short(ref: str) -> str:
    proc = subprocess.run(
        ["git", "rev-parse", "--short", ref], cwd=REPO, capture_output=True, text=True
    )
    return proc.stdout.strip() or ref


def environment(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def timed_command(
    cmd: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """(child CPU seconds, wall seconds, exit code) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900
    )
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, proc.returncode


def runnercheck_command(tree: Path, args: list[str]) -> tuple[list[str], dict[str, str]]:
    return [sys.executable, "-m", "runnercheck", *args], environment(tree)


def temporary() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="runnercheck-baseline-")
