"""``fuzz`` never ends in a traceback or leaves a process behind: every numeric option
is bounded, a target that exits while imported is one line, and a deadline takes down
each rank with every process it started."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runnercheck.cli import main
from runnercheck.config import Config
from runnercheck.fuzz import FuzzOptions, Target, fuzz


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--deadline", "nan"], "--deadline must be between 0.1 and 86400 seconds, not nan"),
        (["--deadline", "inf"], "--deadline must be between 0.1 and 86400 seconds, not inf"),
        (["--deadline", "1e-9"], "--deadline must be between 0.1 and 86400 seconds, not 1e-09"),
        (["--world-size", "1000"], "--world-size must be between 1 and 64, not 1000"),
        (["--examples", "0"], "--examples must be between 1 and 1000000, not 0"),
        (["--seed", "-1"], "--seed must be between 0 and 18446744073709551615, not -1"),
    ],
)
def test_numeric_options_are_bounded(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fuzz", "tests.fuzz.fixtures.good:ModelInput", *args]) == 2
    assert capsys.readouterr().err == f"runnercheck: error: {message}\n"


def test_a_target_that_exits_while_imported_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(5)\n")
    assert main(["fuzz", str(tmp_path / "exits_on_import.py")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "runnercheck: error: cannot import module 'exits_on_import': it exited with "
        "status 5 while being imported\n"
    )


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks processes up in /proc")
def test_a_deadline_kills_the_rank_with_the_processes_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    (tmp_path / "spawns_and_blocks.py").write_text(
        textwrap.dedent(
            f"""
            import subprocess, time
            from dataclasses import dataclass
            from typing import Any, Dict
            from tests.fuzz.fixtures.good import ModelInput

            @dataclass(frozen=True)
            class SpawnsAndBlocks(ModelInput):
                @classmethod
                def from_broadcasted_tensor_dict(
                    cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
                ) -> "SpawnsAndBlocks":
                    if tensor_dict.get("input_tokens") is not None:
                        child = subprocess.Popen(["sleep", "600"])
                        with open({str(pids)!r}, "a") as handle:
                            handle.write(f"{{child.pid}}\\n")
                        time.sleep(10_000)
                    return super().from_broadcasted_tensor_dict(tensor_dict, attn_backend)
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        cls = importlib.import_module("spawns_and_blocks").SpawnsAndBlocks
    finally:
        sys.path.remove(str(tmp_path))
    target = Target(cls, "spawns_and_blocks:SpawnsAndBlocks", (str(tmp_path),))
    report = fuzz([target], FuzzOptions(2, "cpu", 5, 1, 2.0), Config())
    [problem] = report.results[0].problems
    assert problem.code == "RC306" and "did not finish within the deadline" in problem.message
    started = [int(line) for line in pids.read_text().split()]
    assert started
    deadline = time.monotonic() + 10
    while any(_state(pid) not in (None, "Z") for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [_state(pid) for pid in started if _state(pid) not in (None, "Z")] == []
    zombies = [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and _state(int(entry)) == "Z" and _parent(int(entry)) == os.getpid()
    ]
    assert zombies == []


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("import os\nos._exit(7)\n", "it exited with status 7 while being imported"),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
            "it was killed by signal 9 (SIGKILL) while being imported",
        ),
        (
            "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n",
            f"it was stopped by signal {int(signal.SIGSTOP)} (SIGSTOP) while being imported",
        ),
        (
            "import time\ntime.sleep(600)\n",
            "it did not finish importing within the deadline of 1 s",
        ),
    ],
    ids=["os._exit", "SIGKILL", "SIGSTOP", "hang"],
)
def test_a_target_that_ends_or_hangs_while_imported_is_one_line_within_the_deadline(
    tmp_path: Path, body: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad_at_import.py").write_text(body)
    started = time.monotonic()
    assert main(["fuzz", "--deadline", "1", str(tmp_path / "bad_at_import.py")]) == 2
    assert time.monotonic() - started < 10
    assert capsys.readouterr().err == (
        f"runnercheck: error: cannot import module 'bad_at_import': {reason}\n"
    )


LEAKY = """
import os, subprocess, sys
from dataclasses import dataclass
from typing import Any, Dict

def _note(pid):
    with open({pids!r}, "a") as handle:
        handle.write(f"{{pid}}\\n")

# at import (here, in the trial import and on every rank): a child that ignores SIGTERM,
# and a daemon that leaves the session and double-forks
_note(subprocess.Popen([sys.executable, "-c", "import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]).pid)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        _note(os.getpid())
        os.execvp("sleep", ["sleep", "601"])
    os._exit(0)

@dataclass(frozen=True)
class LeakyInput:
    num_steps: int = 1

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"num_steps": self.num_steps}}

    @classmethod
    def from_broadcasted_tensor_dict(
        cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> "LeakyInput":
        return cls(**tensor_dict)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks processes up in /proc")
def test_every_process_the_target_started_is_ended_after_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pids = tmp_path / "pids"
    (tmp_path / "leaky_input.py").write_text(LEAKY.format(pids=str(pids)))
    assert main(["fuzz", "--examples", "2", "--seed", "1", str(tmp_path / "leaky_input.py")]) == 0
    err = capsys.readouterr().err
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) >= 4  # here and in the trial import at least
    assert [pid for pid in started if _state(pid) not in (None, "Z")] == []
    assert err.startswith("runnercheck fuzz: ended what the run left running: ")
    assert "could not be ended" not in err


# Stops the process that imports it, or that rebuilds an example: runnercheck's own
# process (the trial import and the ranks are its children), after noting when.
STOPS_ITS_PARENT_AT_IMPORT = """
import os, signal, time
with open({stamp!r}, "w") as handle:
    handle.write(repr(time.time()))
os.kill(os.getppid(), signal.SIGSTOP)
"""

STOPS_ITS_PARENT_ON_A_RANK = """
import os, signal, time
from dataclasses import dataclass
from typing import Any, Dict
from tests.fuzz.fixtures.good import ModelInput

@dataclass(frozen=True)
class StopsItsParent(ModelInput):
    @classmethod
    def from_broadcasted_tensor_dict(
        cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> "StopsItsParent":
        with open({stamp!r}, "w") as handle:
            handle.write(repr(time.time()))
        os.kill(os.getppid(), signal.SIGSTOP)
        time.sleep(600)
        return super().from_broadcasted_tensor_dict(tensor_dict, attn_backend)
"""

#: Seconds a run may take to end beyond its deadline (the load of a shared machine).
MARGIN = 6.0


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks processes up in /proc")
@pytest.mark.parametrize(
    ("source", "code", "line"),
    [
        (
            STOPS_ITS_PARENT_AT_IMPORT,
            2,
            "runnercheck: error: cannot import module 'stops_its_parent': it stopped "
            "runnercheck's own process (SIGSTOP) while being imported, and the deadline "
            "of 2 s passed",
        ),
        (
            STOPS_ITS_PARENT_ON_A_RANK,
            1,
            "runnercheck: RC306 runnercheck's own process was stopped (SIGSTOP; does the code "
            "under test signal its parent?) and the deadline of 2 s passed: the run was ended",
        ),
    ],
    ids=["at-import", "on-a-rank"],
)
def test_a_target_that_stops_runnercheck_is_ended_at_the_deadline(
    tmp_path: Path, source: str, code: int, line: str
) -> None:
    from tests.cli_runs import run_cli

    stamp = tmp_path / "stopped_at"
    module = tmp_path / "stops_its_parent.py"
    module.write_text(source.format(stamp=str(stamp)))
    ran = run_cli(
        ["fuzz", "--deadline", "2", "--examples", "5", "--seed", "1", str(module)], tmp_path
    )
    assert ran.returncode is not None, "runnercheck fuzz hung, stopped by its target"
    assert ran.ended - float(stamp.read_text()) < 2 + MARGIN
    assert (ran.returncode, ran.stderr, ran.stdout) == (code, line + "\n", "")
    assert ran.left == []
