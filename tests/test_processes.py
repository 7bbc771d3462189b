"""``Sweep``: every process started below this one is found and ended, however it left
(its process group, its session, a double fork), and nothing that ran before is touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.processes import Sweep, descendants
from runnercheck.trace.report import TraceReport

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")

ESCAPES = """
import os, signal, subprocess, sys, time
# a daemon: a new session, then a double fork
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
    os._exit(0)
# a child in the group that ignores SIGTERM
ignore = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ignoring', flush=True); time.sleep(600)"
)
child = subprocess.Popen([sys.executable, "-c", ignore], stdout=subprocess.PIPE)
child.stdout.readline()  # it ignores SIGTERM now
"""


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _ignores_term(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    ignored = int(
        next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16
    )
    return bool(ignored & (1 << (signal.SIGTERM - 1)))


def test_escaped_processes_are_found_and_ended() -> None:
    before = subprocess.Popen(["sleep", "600"])  # not the sweep's: left alone
    try:
        sweep = Sweep()
        subprocess.run([sys.executable, "-c", ESCAPES], check=True, timeout=60)
        left = sweep.living()
        assert len(left) == 2, left  # re-parented here although their parents exited
        ignoring = [pid for pid in left if _ignores_term(pid)]
        assert len(ignoring) == 1  # so SIGKILL after the grace period ends it
        assert sweep.end(grace=0.5) == []
        assert all(_state(pid) is None for pid in left)  # ended and reaped
        assert _state(before.pid) not in (None, "Z")
        assert before.pid not in sweep.started()
    finally:
        before.kill()
        before.wait()


def test_spared_processes_are_kept_and_nothing_started_means_nothing_ended() -> None:
    sweep = Sweep()
    kept = subprocess.Popen(["sleep", "600"])
    try:
        sweep.spare([kept.pid])
        assert sweep.end() == []
        assert kept.poll() is None and kept.pid in descendants(os.getpid())
    finally:
        kept.kill()
        kept.wait()


def test_a_stopped_trace_names_what_it_could_not_end() -> None:
    report = TraceReport(["cmd"], [], None, 1.0, stopped="the ranks diverged")
    assert "every process of it ended" in report.problems()[0]
    report.left_behind = [4242]
    lines = report.problems()
    assert "every process of it ended" not in " ".join(lines)
    assert lines[-1] == "processes of the run that could not be ended, still running: 4242"
    assert not report.ok


# A command's process with a watchdog, stopped by its own child: the watchdog ends its
# other child and raises Overrun in it once the deadline (or the timeout) has passed.
STOPPED_BY_ITS_CHILD = """
import os, signal, subprocess, sys, time
from runnercheck.processes import Overrun, Watchdog

watchdog = Watchdog({stall}, {timeout}, interrupt=True)
sleeper = subprocess.Popen(["sleep", "600"])
subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getppid(), signal.SIGSTOP)"])
started = time.monotonic()
try:
    time.sleep(60)
    print("slept")
except Overrun as overrun:
    print(overrun.limit, overrun.seconds, round(time.monotonic() - started, 1))
finally:
    watchdog.close()
print(sleeper.wait(timeout=5))
"""


@pytest.mark.parametrize(
    ("stall", "timeout", "limit"),
    [(1.0, None, "deadline 1.0"), (60.0, 1.0, "timeout 1.0")],
    ids=["deadline", "timeout"],
)
def test_a_watchdog_ends_the_run_of_a_process_stopped_past_its_limit(
    stall: float, timeout: float | None, limit: str
) -> None:
    script = STOPPED_BY_ITS_CHILD.format(stall=stall, timeout=timeout)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.stderr == ""
    said, ended = done.stdout.splitlines()
    assert said.startswith(limit + " ") and 0.9 < float(said.split()[-1]) < 4.0
    assert ended == str(-signal.SIGKILL)  # the other child: killed
