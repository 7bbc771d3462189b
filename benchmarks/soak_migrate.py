"""Soak test of ``migrate``'s writes on real vLLM: kills, edits, a full disk, Ctrl-C,
concurrent runs and crafted journals.

The harness of ``tests/stress`` (see :mod:`tests.stress.harness`), for longer and on a
copy of vLLM 0.5.0's ``vllm/worker/`` (six files rewritten or created, one
transaction). Run kinds:

* killed (``--killed`` runs, in turn): ``checkpoint`` (the writer is killed with
  SIGKILL at a random checkpoint of the commit), ``timed`` (after a random delay within
  the commit's duration), ``cli`` (the whole ``runnercheck migrate`` command, planning
  included, after a random delay within its duration);
* ``diskfull`` (``--diskfull``): the file size limit (RLIMIT_FSIZE, writes past it fail
  with EFBIG) set at random once the journal is written, so that a write is cut short,
  or before the run, so that the journal does not fit;
* ``sigint`` (``--sigint``): ``runnercheck migrate`` gets Ctrl-C one to three times;
* ``concurrent`` (``--concurrent``): two ``runnercheck migrate`` at once on the tree;
* ``hostile`` (``--hostile``): a crafted journal in the tree that would write outside it
  if it were trusted (a directory link, a foreign journal, a blob link, mode 6777);
* ``race`` (``--race``): once the journal exists, a racing thread swaps the tree's
  ``worker/`` for a link to an outside copy, or for a copy moved in;
* ``links`` (``--links``): a linked facts cache (or facts directory), planted
  ``.runnercheck-migrate.<pid>.done`` links, or a file hard-linked to one outside
  (:mod:`tests.stress.attacks`; these two run on ``ROOT/worker/``).

Half the runs (``--edit-chance``) also append a line to a random file at a random
moment. After each run, ``runnercheck migrate --recover`` and the checks: no lost
edit, every group old or new, nothing left behind, nothing outside the tree changed
(a directory beside it is hashed around every run), no traceback, no abort, no wrong
answer (a second run judging the first one's writes, a crafted journal not reported
in one line). The CI part of the same harness is ``tests/stress``.

It also measures, in the same run, what the transaction costs: a whole commit
(lock, journal, verified in-place writes, journal removed) against plain in-place
writes of the same contents (open, write, fsync each file), median of ``--reps``; with
``--baseline REF``, the same commit by the code of ``REF`` (run from a copy of its
packages, interleaved with this tree's, one process each); and the peak memory of
``runnercheck check`` on a 30 MB file against an empty one.

Usage::

    python benchmarks/soak_migrate.py [--version 0.5.0] [--killed 105] [--diskfull 20]
        [--sigint 20] [--concurrent 10] [--hostile 12] [--race 20] [--links 20]
        [--seed 1] [--edit-chance 0.5] [--baseline REF] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from runnercheck.writes.transaction import commit  # noqa: E402
from tests.stress.attacks import KINDS as ATTACKS  # noqa: E402
from tests.stress.attacks import make_nested_plan  # noqa: E402
from tests.stress.harness import CLI_KINDS, Plan, make_plan, reset, runs  # noqa: E402
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


def _cost_in_process(source: Path, reps: int) -> None:
    """``--cost-only``: print this tree's commit cost as JSON (run by
    :func:`versus_baseline` from either tree)."""
    with tempfile.TemporaryDirectory(prefix="runnercheck-cost-") as tmp:
        plan = make_plan(source, Path(tmp).resolve() / "tree")
        print(json.dumps(costs(plan, reps)))


def versus_baseline(source: Path, ref: str, rounds: int, reps: int) -> dict[str, float]:
    """The commit's median time by this tree and by ``ref``, in alternating processes."""
    from benchmarks.baseline import baseline_tree

    times: dict[str, list[float]] = {"this": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="runnercheck-baseline-") as tmp:
        old = baseline_tree(ref, Path(tmp))
        for _ in range(rounds):
            for name, first in (("this", REPO), ("baseline", old)):
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(first), str(REPO)])}
                command = [sys.executable, __file__, "--cost-only", "--tree", str(source)]
                done = subprocess.run(
                    [*command, "--reps", str(reps)],
                    cwd=first,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=600,
                )
                times[name].append(json.loads(done.stdout.splitlines()[-1])["commit_s"])
    this, before = statistics.median(times["this"]), statistics.median(times["baseline"])
    return {"commit_s": this, "baseline_commit_s": before, "ratio": this / before}


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


def peak_memory(tmp: Path) -> dict[str, float]:
    """Peak RSS of ``runnercheck check`` on a 30 MB file that mentions the contract,
    against the same command on an empty file (the baseline: the interpreter and the
    imports), both measured here and now."""

    def peak(directory: Path) -> int:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import resource, subprocess, sys\n"
                "subprocess.run([sys.executable, '-m', 'runnercheck', 'check', sys.argv[1]],"
                " capture_output=True)\n"
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
                str(directory),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        return int(done.stdout.split()[-1])

    big, empty = tmp / "big", tmp / "empty"
    big.mkdir()
    empty.mkdir()
    (empty / "a.py").write_bytes(b"")
    line = b"def f(x):\n    return broadcast_tensor_dict(x)\n\n"
    (big / "a.py").write_bytes(line * (30 * 1024 * 1024 // len(line)))
    big_kb, empty_kb = peak(big), peak(empty)
    return {"big_kb": big_kb, "empty_kb": empty_kb, "ratio": big_kb / empty_kb}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.0")
    parser.add_argument("--tree", type=Path, help="another tree (default: vLLM's worker/)")
    parser.add_argument("--killed", type=int, default=105)
    parser.add_argument("--diskfull", type=int, default=20)
    parser.add_argument("--sigint", type=int, default=20)
    parser.add_argument("--concurrent", type=int, default=10)
    parser.add_argument("--hostile", type=int, default=12)
    parser.add_argument("--race", type=int, default=20)
    parser.add_argument("--links", type=int, default=20)
    parser.add_argument("--baseline", metavar="REF", help="also time REF's commit")
    parser.add_argument("--rounds", type=int, default=5, help="processes per tree (--baseline)")
    parser.add_argument("--cost-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kinds", default="checkpoint,timed,cli", help="the killed kinds")
    parser.add_argument("--edit-chance", type=float, default=0.5)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    source = args.tree or vllm_package(args.version) / "worker"
    if args.cost_only:
        _cost_in_process(source, args.reps)
        return 0
    killed = [k for k in args.kinds.split(",") if k]
    schedule = [killed[n % len(killed)] for n in range(args.killed)]
    for kind in ("diskfull", "sigint", "concurrent", "hostile", *ATTACKS):
        schedule += [kind] * getattr(args, kind)
    random.Random(args.seed).shuffle(schedule)
    kinds = tuple(schedule)
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
        versus: dict[str, float] = {}
        if args.baseline:
            versus = versus_baseline(source, args.baseline, args.rounds, args.reps)
            print(
                f"commit {versus['commit_s'] * 1e3:.1f} ms vs {args.baseline}'s "
                f"{versus['baseline_commit_s'] * 1e3:.1f} ms (x{versus['ratio']:.2f}, median of "
                f"{args.rounds} processes each, alternating)"
            )
        if set(kinds) & set(CLI_KINDS):
            plan.cli_seconds = cli_seconds(plan)
            print(f"one `runnercheck migrate` run: {plan.cli_seconds:.1f} s")
        nested = None
        if set(kinds) & set(ATTACKS):
            nested = make_nested_plan(source, Path(tmp).resolve() / "nested")
            nested.cli_seconds = cli_seconds(nested)
        started = time.perf_counter()
        tally = runs(plan, len(kinds), args.seed, kinds, args.edit_chance, nested)
        memory = peak_memory(Path(tmp))
        print(
            f"runnercheck check, peak RSS: a 30 MB file {memory['big_kb'] / 1024:.0f} MiB, an "
            f"empty file {memory['empty_kb'] / 1024:.0f} MiB (x{memory['ratio']:.2f})"
        )
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
            "writes_outside_the_tree": tally.outside_writes,
            "tracebacks": tally.tracebacks,
            "aborts": tally.aborts,
            "wrong_answers": tally.wrong,
            "cost": cost,
            "versus_baseline": versus,
            "memory": memory,
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if not tally.failures else 1


if __name__ == "__main__":
    raise SystemExit(main())
