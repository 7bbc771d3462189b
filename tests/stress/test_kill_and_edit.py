"""``migrate`` under kill -9 and concurrent edits: nothing lost, no group left mixed.

The randomized part runs ``RUNNERCHECK_STRESS_RUNS`` runs (default 75, at least 50 of
them killed) on a copy of the engine fixture; ``benchmarks/soak_migrate.py`` runs the
same harness longer, on vLLM."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from runnercheck.files import JOURNAL_NAME
from tests.migrate.conftest import FIXTURES
from tests.stress.harness import ROOT, Plan, make_plan, reset, runs, write_with_fault

ENGINE = FIXTURES / "engine" / "before"
RUNS = int(os.environ.get("RUNNERCHECK_STRESS_RUNS", "75"))


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    return make_plan(ENGINE, tmp_path_factory.mktemp("stress").resolve() / "engine")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def writer(plan: Plan, fault: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runnercheck", "migrate", str(plan.root)],
        cwd=ROOT,
        env={**os.environ, "RUNNERCHECK_FAULT": fault},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_journal(plan: Plan, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not (plan.root / JOURNAL_NAME).exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.002)


def states(plan: Plan) -> set[str]:
    """ "old" / "new" for each file of the change set (anything else fails)."""
    found = set()
    for change in plan.changes:
        current = change.path.read_bytes() if change.path.exists() else None
        assert current in (change.old, change.new), change.path
        found.add("new" if current == change.new else "old")
    return found


@pytest.mark.slow
def test_randomized_kills_and_edits_lose_nothing_and_mix_nothing(plan: Plan) -> None:
    # two runs in three killed at a random checkpoint (always a kill), one after a
    # random delay (a kill unless the commit was faster)
    tally = runs(plan, RUNS, seed=14, kinds=("checkpoint", "checkpoint", "timed"))
    print(tally.line())
    assert tally.killed >= min(50, RUNS * 2 // 3) and tally.edited >= tally.runs // 4
    assert (tally.lost_edits, tally.mixed_units, tally.foreign_files, tally.leftovers) == (
        0,
        0,
        0,
        0,
    ), tally.failures


@pytest.mark.slow
def test_every_checkpoint_is_recovered_and_a_mixed_tree_is_reported(plan: Plan) -> None:
    """kill -9 at each checkpoint in turn: ``check`` and ``migrate --check`` report a
    half-applied group exactly when there is one, and ``migrate`` recovers it and
    finishes the migration (in this process: the same functions as the commands)."""
    from codemods.framework.pipeline import migrate
    from runnercheck.check.pipeline import check_paths
    from runnercheck.writes import journal
    from runnercheck.writes.recovery import recover
    from runnercheck.writes.transaction import commit

    reported = 0
    for number in range(1, plan.checkpoints + 1):
        reset(plan)
        assert write_with_fault(plan, f"kill:{number}") == -signal.SIGKILL
        written = {c.path.exists() and c.path.read_bytes() == c.new for c in plan.changes}
        mixed = len(written) > 1
        codes = [f.code for f in check_paths([plan.root]).findings]
        assert ("RC003" in codes) == mixed, codes
        assert any(p.half_applied for p in journal.pending([plan.root])) == mixed
        reported += mixed
        recover([plan.root])
        assert states(plan) == {"old"} or states(plan) == {"new"}
        result = migrate([str(plan.root)])
        outcome = commit(
            list(result.changes.values()),
            [plan.root],
        )
        assert outcome.refused == [] and states(plan) == {"new"}
        assert [e for e in os.listdir(plan.root) if e.startswith(JOURNAL_NAME)] == []
    assert reported >= 3  # the points inside the unit's writes


@pytest.mark.slow
def test_the_next_migrate_command_recovers_and_migrates(plan: Plan) -> None:
    _kill_at(plan, "file", 3)
    checked = cli("check", str(plan.root))
    assert checked.returncode == 1 and " RC003 " in checked.stdout, checked.stdout
    dry = cli("migrate", "--check", str(plan.root))
    assert dry.returncode == 1 and " MIG007 " in dry.stdout, dry.stdout
    again = cli("migrate", str(plan.root))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"{plan.root}/{JOURNAL_NAME}: recovered"), again.stdout
    assert "rolled back" in again.stdout.splitlines()[0]
    assert states(plan) == {"new"}
    assert cli("check", str(plan.root)).returncode == 0


@pytest.mark.slow
def test_an_edit_while_a_file_is_written_waits_and_is_kept(plan: Plan) -> None:
    """The watcher of the report: it appends the moment the journal appears. The writer
    pauses right after re-verifying the file, and holds a lease: the append waits for
    the write and lands on the new contents."""
    probe = plan.root / "lease-probe"
    probe.write_bytes(b"")
    fd = os.open(probe, os.O_RDWR)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError:
        pytest.skip("this file system gives no leases (the window is then a few system calls)")
    finally:
        os.close(fd)
        probe.unlink()
    reset(plan)
    first = plan.units[0][0]
    line = b"# saved by an editor during the write\n"
    proc = writer(plan, "pause:verified:0.5")
    wait_for_journal(plan, proc)
    time.sleep(0.1)  # the writer is inside its pause on the first file
    with open(first, "ab") as handle:
        handle.write(line)
    assert proc.wait(timeout=300) == 0
    data = first.read_bytes()
    change = next(c for c in plan.changes if c.path == first)
    assert data == change.new + line
    others = [c for c in plan.changes if c.path != first]
    assert all(c.path.read_bytes() == c.new for c in others)


@pytest.mark.slow
def test_an_edit_before_the_write_refuses_the_group_and_is_kept(plan: Plan) -> None:
    reset(plan)
    victim = plan.existing()[-1]
    line = b"# saved before the write reached this file\n"
    proc = writer(plan, "pause:journal-written:0.5")
    wait_for_journal(plan, proc)
    with open(victim, "ab") as handle:
        handle.write(line)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1
    assert f"{victim}: MIG005" in out or f"{victim.name}: MIG005" in out, out
    assert "changed on disk during the migration" in out
    change = next(c for c in plan.changes if c.path == victim)
    assert victim.read_bytes() == change.old + line
    assert all(c.path.read_bytes() == c.old for c in plan.changes if c.path != victim and c.old)
    assert not any(c.path.exists() for c in plan.changes if c.old is None)
    assert [e for e in os.listdir(plan.root) if e.startswith(JOURNAL_NAME)] == []


def _kill_at(plan: Plan, name: str, nth: int) -> None:
    """kill -9 at the ``nth`` checkpoint called ``name`` (counted in a run to the end)."""
    from runnercheck.writes import checkpoints
    from runnercheck.writes.transaction import commit

    reset(plan)
    seen: list[str] = []
    checkpoints.hook = seen.append
    try:
        commit(plan.changes, [plan.root])
    finally:
        checkpoints.hook = None
    number = [i for i, n in enumerate(seen, 1) if n == name][nth - 1]
    reset(plan)
    assert write_with_fault(plan, f"kill:{number}") == -signal.SIGKILL


def test_edits_after_a_crash_are_kept_and_the_group_ends_whole(plan: Plan) -> None:
    order = plan.existing()
    line = b"# edited after the crash\n"
    by_path = {c.path: c for c in plan.changes}
    # killed after the first file was written (and logged done): that file edited -> forward
    _kill_at(plan, "file", 2)
    with open(order[0], "ab") as handle:
        handle.write(line)
    result = cli("migrate", "--recover", str(plan.root))
    assert result.returncode == 0 and "rolled forward" in result.stdout, result.stdout
    assert order[0].read_bytes() == by_path[order[0]].new + line
    assert all(p.read_bytes() == by_path[p].new for p in order[1:])
    # the same crash, a file not yet written edited -> rolled back
    _kill_at(plan, "file", 2)
    with open(order[-1], "ab") as handle:
        handle.write(line)
    result = cli("migrate", "--recover", str(plan.root))
    assert result.returncode == 0 and "rolled back" in result.stdout, result.stdout
    assert order[-1].read_bytes() == by_path[order[-1]].old + line
    assert all(
        (p.read_bytes() if p.exists() else None) == by_path[p].old
        for p in plan.units[0]
        if p != order[-1]
    )


def test_edits_of_both_kinds_after_a_crash_stop_for_a_person(plan: Plan) -> None:
    """One file edited from its new contents, another from its old ones: neither way
    keeps both edits and makes the group whole, so nothing is touched."""
    _kill_at(plan, "file", 2)  # the first file written, the others not yet
    order = plan.existing()
    for path in (order[0], order[-1]):
        with open(path, "ab") as handle:
            handle.write(b"# edited after the crash\n")
    before = {p: p.read_bytes() for p in order if p.exists()}
    result = cli("migrate", str(plan.root))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "put the files right, then delete that directory" in lines[0]
    assert {p: p.read_bytes() for p in order if p.exists()} == before
    assert (plan.root / JOURNAL_NAME / "old").is_dir()
    checked = cli("check", str(plan.root))
    assert " RC003 " in checked.stdout and "edited since" in checked.stdout


def test_sigterm_during_the_writes_finishes_cleanly(plan: Plan) -> None:
    reset(plan)
    proc = writer(plan, "pause:verified:0.3")
    wait_for_journal(plan, proc)
    time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and err.strip().endswith("runnercheck: interrupted")
    assert states(plan) in ({"old"}, {"new"})
    assert [e for e in os.listdir(plan.root) if e.startswith(JOURNAL_NAME)] == []


def test_a_file_replaced_by_a_directory_mid_run_is_one_line(plan: Plan) -> None:
    reset(plan)
    victim = plan.existing()[-1]
    proc = writer(plan, "pause:journal-written:0.5")
    wait_for_journal(plan, proc)
    saved = victim.read_bytes()
    victim.unlink()
    victim.mkdir()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in out + err
    assert f"{victim}: MIG005 [write] is no longer a regular file" in out, out
    victim.rmdir()
    victim.write_bytes(saved)
    assert states(plan) == {"old"}
