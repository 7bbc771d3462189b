"""Soak test of ``migrate``'s writes on real vLLM: randomized kill -9 and edit runs.

The harness of ``tests/stress`` (see :mod:`tests.stress.harness`), for longer and on a
copy of vLLM 0.5.0's ``vllm/worker/`` (six files rewritten or created, one
transaction). Run kinds, in turn:

* ``checkpoint``: the writer is killed at a random checkpoint of the commit;
* ``timed``: the writer is killed after a random delay within the commit's duration;
* ``cli``: the whole ``runnercheck migrate`` command (planning included) is killed
  after a random delay within its duration.

Half the runs (``--edit-chance``) also append a line to a random file at a random
moment. After each run, ``runnercheck migrate --recover`` and the checks: no lost
edit, every group old or new, nothing left behind. The CI part of the same harness
is ``tests/stress/test_kill_and_edit.py`` (``RUNNERCHECK_STRESS_RUNS`` runs, default 75).

It also measures, in the same run, what the transaction costs: a whole commit
(lock, journal, verified in-place writes, journal removed) against plain in-place
writes of the same contents (open, write, fsync each file), median of ``--reps``.

Usage::

    python benchmarks/soak_migrate.py [--version 0.5.0] [--runs 120] [--seed 1]
        [--kinds checkpoint,timed,cli] [--edit-chance 0.5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from codemods.transaction import commit  # noqa: E402
from tests.stress.harness import Plan, make_plan, reset, runs  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402


def plain_writes(plan: Plan) -> None:
    """The baseline: write every new content in place, fsync, nothing else."""
    for change in plan.changes:
        fd = os.open(change.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, change.new)
            os.fsync(fd)
        finally:
            os.close(fd)


def costs(plan: Plan, reps: int) -> dict[str, float]:
    transaction, plain = [], []
    for _ in range(reps):  # interleaved: both see the same machine state
        reset(plan)
        started = time.perf_counter()
        outcome = commit(plan.changes, [plan.root])
        transaction.append(time.perf_counter() - started)
        assert not outcome.refused
        reset(plan)
        started = time.perf_counter()
        plain_writes(plan)
        plain.append(time.perf_counter() - started)
    reset(plan)
    return {
        "commit_s": statistics.median(transaction),
        "plain_writes_s": statistics.median(plain),
        "ratio": statistics.median(transaction) / statistics.median(plain),
    }


def cli_seconds(plan: Plan) -> float:
    reset(plan)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", str(plan.root)],
        cwd=REPO,
        capture_output=True,
        check=False,
        timeout=600,
    )
    reset(plan)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.0")
    parser.add_argument("--tree", type=Path, help="another tree (default: vLLM's worker/)")
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default="checkpoint,timed,cli")
    parser.add_argument("--edit-chance", type=float, default=0.5)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    source = args.tree or vllm_package(args.version) / "worker"
    kinds = tuple(k for k in args.kinds.split(",") if k)
    with tempfile.TemporaryDirectory(prefix="runnercheck-soak-") as tmp:
        plan = make_plan(source, Path(tmp).resolve() / "tree")
        names = ", ".join(c.path.name for c in plan.changes)
        print(
            f"tree: {source} ({len(plan.changes)} files in {len(plan.units)} transaction: {names})"
        )
        print(f"checkpoints per commit: {plan.checkpoints}")
        cost = costs(plan, args.reps)
        print(
            f"commit {cost['commit_s'] * 1e3:.1f} ms vs plain in-place writes "
            f"{cost['plain_writes_s'] * 1e3:.1f} ms (x{cost['ratio']:.1f}, median of {args.reps})"
        )
        if "cli" in kinds:
            plan.cli_seconds = cli_seconds(plan)
            print(f"one `runnercheck migrate` run: {plan.cli_seconds:.1f} s")
        started = time.perf_counter()
        tally = runs(plan, args.runs, args.seed, kinds, args.edit_chance)
        elapsed = time.perf_counter() - started
    print(tally.line() + f" ({elapsed:.0f} s)")
    for line in tally.persons:
        print(f"  left for a person: {line}")
    for line in tally.failures:
        print(f"  FAILED: {line}")
    if args.json:
        report = {
            "tree": str(source),
            "runs": tally.runs,
            "kinds": dict(tally.kinds),
            "killed": tally.killed,
            "edited": tally.edited,
            "half_applied_by_the_kill": tally.half_applied,
            "recovered": tally.recovered,
            "person": tally.person,
            "lost_edits": tally.lost_edits,
            "mixed_groups": tally.mixed_units,
            "files_neither_old_nor_new": tally.foreign_files,
            "leftovers": tally.leftovers,
            "cost": cost,
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if not tally.failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
