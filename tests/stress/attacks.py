"""Runs of the whole ``runnercheck migrate`` command against a tree that is attacked
while it runs, for :mod:`tests.stress.harness` and ``benchmarks/soak_migrate.py``.

The tree is ``ROOT/worker/`` (with a ``pyproject.toml`` in ``ROOT``, so that the facts
cache is used), and a copy of ``worker/`` lies beside ``ROOT``. Kinds:

- ``race``: a racing thread waits until the journal exists, then renames
  ``ROOT/worker`` away and puts a symbolic link to the outside copy (or the copy itself,
  moved in) in its place;
- ``links``: before the run, one of: ``.runnercheck_cache`` or its facts directory a
  link to the outside, ``.runnercheck-migrate.<pid>.done``/``.new`` links for the next
  pids, or a file of the group hard-linked to a file outside.

After each run the attack is undone, ``runnercheck migrate --recover`` runs, and the
same judge as the other kinds checks the tree; the outside directory is fingerprinted
around the run and must not change. A wrong answer: a hard-linked file not refused
with MIG003, or a run that fails where nothing was in its way.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from runnercheck.files import JOURNAL_NAME
from tests.stress import harness
from tests.stress.harness import Plan, RunResult

#: The kinds this module runs.
KINDS = ("race", "links")
LINK_CASES = ("cache link", "facts link", "journal names", "hard link")


def make_nested_plan(source: Path, work: Path) -> Plan:
    """``work/worker`` holds a copy of ``source``; ``work`` is what ``migrate`` is given."""
    work.mkdir(parents=True)
    (work / "pyproject.toml").write_text("[tool.runnercheck]\n")
    shutil.copytree(source, work / "worker", ignore=shutil.ignore_patterns("__pycache__"))
    return harness.make_plan(work, work, copy=False)


def _copy_outside(plan: Plan) -> Path:
    outside = harness.outside_of(plan)
    copy = outside / "worker"
    if not copy.exists():
        shutil.copytree(plan.root / "worker", copy)
    return outside


def _command(plan: Plan, *options: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "runnercheck", "migrate", *options, str(plan.root)],
        cwd=harness.ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _racer(
    plan: Plan, outside: Path, how: str, deadline: float
) -> tuple[threading.Thread, list[str]]:
    """Swap ``worker/`` once the journal exists; the list says whether it did."""
    done: list[str] = []
    worker = plan.root / "worker"

    def run() -> None:
        while not (plan.root / JOURNAL_NAME).exists():
            if time.monotonic() > deadline:
                return
            time.sleep(0.0005)
        worker.rename(plan.root / "worker.away")
        if how == "link":
            worker.symlink_to(outside / "worker")
        else:
            shutil.copytree(outside / "worker", plan.root / "moved-in")
            (plan.root / "moved-in").rename(worker)
        done.append(how)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done


def _undo_swap(plan: Plan) -> None:
    worker, away = plan.root / "worker", plan.root / "worker.away"
    if away.exists():
        if worker.is_symlink():
            worker.unlink()
        elif worker.exists():
            shutil.rmtree(worker)
        away.rename(worker)


def _plant(plan: Plan, outside: Path, case: str) -> list[Path]:
    """Plant ``case``; the names planted (removed after the run)."""
    root = plan.root
    target = outside / "cache"
    target.mkdir(exist_ok=True)
    if case == "cache link":
        (root / ".runnercheck_cache").symlink_to(target)
        return [root / ".runnercheck_cache"]
    if case == "facts link":
        (root / ".runnercheck_cache").mkdir()
        (root / ".runnercheck_cache" / "facts-v2").symlink_to(target)
        return [root / ".runnercheck_cache"]
    if case == "journal names":
        start = os.getpid()
        planted = []
        for pid in range(start, start + 200):
            for suffix in ("done", "new"):
                name = root / f"{JOURNAL_NAME}.{pid}.{suffix}"
                name.symlink_to(outside)
                planted.append(name)
        return planted
    victim = plan.existing()[0]
    twin = outside / "twin.py"
    twin.unlink(missing_ok=True)
    os.link(victim, twin)
    return [twin]


def one_attack(plan: Plan, rng: random.Random, kind: str) -> RunResult:
    """One run of ``kind`` (see the module docstring)."""
    harness.reset(plan)
    outside = _copy_outside(plan)
    result = RunResult(kind, killed=False, edited=False)
    case = rng.choice(["link", "directory"]) if kind == "race" else rng.choice(LINK_CASES)
    planted = _plant(plan, outside, case) if kind == "links" else []
    before = harness.fingerprint(outside)
    proc = _command(plan)
    racer = None
    if kind == "race":
        racer = _racer(plan, outside, case, time.monotonic() + plan.cli_seconds * 3 + 5)
    out, _ = proc.communicate(timeout=600)
    text = out.decode("utf-8", "replace")
    swapped = ""
    if racer is not None:
        racer[0].join(timeout=60)
        swapped = racer[1][0] if racer[1] else "too late"
    result.tracebacks = "Traceback" in text
    result.outside_writes = int(harness.fingerprint(outside) != before)
    for path in planted:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
    _undo_swap(plan)
    if case == "hard link":
        result.wrong = int(proc.returncode != 1 or "MIG003" not in text)
    elif kind == "links":
        result.wrong = int(proc.returncode != 0)
    else:  # refused (1), or a group cut off by the swap, its journal kept (2)
        result.wrong = int(proc.returncode not in (0, 1, 2))
    code, recovered = harness.recover_cli(plan)  # the attack undone: nothing in its way
    result.tracebacks += "Traceback" in recovered
    result.wrong += code != 0
    result.detail = f"{kind} {case} {swapped}: exit {proc.returncode}: {text.strip()[-300:]}"
    harness.judge(plan, None, result)
    harness.reset(plan)
    return result
