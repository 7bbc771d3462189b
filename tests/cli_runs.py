"""Running the real ``runnercheck`` command line in a subprocess, held to a time limit,
and finding every process it left behind.

Each run gets a marker in its environment, which every process it starts inherits (the
traced command's too); a process alive after the run that carries the marker was left
behind. Whatever is left, the run included, is continued and killed after the look, so
that a hang never outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "RUNNERCHECK_TEST_RUN"


@dataclass
class Ran:
    #: Exit status (None: still running at the limit; it was killed).
    returncode: int | None
    stdout: str
    stderr: str
    #: When the run ended (or was given up on), as ``time.time()``.
    ended: float
    #: Processes of the run alive after it ended: pid and command line.
    left: list[tuple[int, str]]


def _marked(marker: str) -> list[tuple[int, str]]:
    found = []
    needle = f"{MARKER}={marker}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and needle in environ.split(b"\0"):
            found.append((int(entry), command.decode(errors="replace").strip()))
    return found


def run_cli(argv: list[str], tmp_path: Path, limit: float = 60.0) -> Ran:
    """``python -m runnercheck ARGV`` from the repository root, given ``limit`` seconds."""
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "runnercheck", *argv],
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        returncode: int | None = process.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        returncode = None
    ended = time.time()
    try:
        # what the run ended is gone at once; allow a moment for it to be reaped
        settle = time.monotonic() + 2.0
        left = _marked(marker)
        while left and returncode is not None and time.monotonic() < settle:
            time.sleep(0.05)
            left = _marked(marker)
    finally:
        for _ in range(3):
            for pid, _ in _marked(marker):
                for signum in (signal.SIGKILL, signal.SIGCONT):
                    try:
                        os.kill(pid, signum)
                    except OSError:
                        pass
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
        process.wait()
    return Ran(returncode, out.read_text(), err.read_text(), ended, left)
