"""Text output never hands a terminal the control characters of a file name or a
message: every subcommand writes them as ``repr`` does (``\\x1b``, ``\\r``, ``\\x07``),
plain or through rich, and keeps other characters as they are. JSON is unchanged (the
JSON encoder already escapes them)."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
#: A file name that sets the terminal's title, rings its bell, blinks and moves the cursor
#: back to the start of the line; and a letter that is not ASCII, left as it is.
NAME = "a\x1b]0;pwned\x07b\x1b[5mc\rdü.py"
SHOWN = "a\\x1b]0;pwned\\x07b\\x1b[5mc\\rdü.py"
CONTROLS = ("\x1b]0;", "\x07", "\x1b[5m")


def test_printable_escapes_control_characters_only() -> None:
    from runnercheck.console import printable

    assert printable(NAME) == SHOWN
    assert printable("tab\tand\nnewline\x00\x7f\x85\u2028é") == (
        "tab\tand\nnewline\\x00\\x7f\\x85\u2028é"
    )
    assert printable("a\nb", newlines=False) == "a\\nb"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "runnercheck", *args]


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc = subprocess.run(command(*args), cwd=cwd, capture_output=True, timeout=120, env=env)
    # decoded here: text mode would read each "\r" as a line's end
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode()
    )


def in_terminal(cwd: Path, *args: str) -> str:
    """What a command writes to a terminal (rich, in colour)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", COLUMNS="1000")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        command(*args), cwd=cwd, stdin=follower, stdout=follower, stderr=follower, env=env
    )
    os.close(follower)
    out = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other side is closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(leader)
        proc.kill() if proc.poll() is None else None
        proc.wait(10)
    return out.decode("utf-8", "replace")


def no_controls(text: str) -> None:
    for control in CONTROLS:
        assert control not in text, text


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A tree with one file ``check`` reports and ``migrate`` rewrites, named NAME."""
    shutil.copy(REPO / "tests/migrate/fixtures/single/inputs_before.py", tmp_path / NAME)
    broken = (REPO / "tests/check/fixtures/syntax-error/bad.py").read_text()
    (tmp_path / ("broken" + NAME)).write_text(broken)
    return tmp_path


def test_check_text_json_and_terminal(tree: Path) -> None:
    proc = run(tree, "check", "--no-cache", ".")
    assert proc.returncode == 1, proc.stderr
    no_controls(proc.stdout)
    assert "\r" not in proc.stdout
    assert f"broken{SHOWN}:5:28: RC001 cannot parse" in proc.stdout
    report = json.loads(run(tree, "check", "--no-cache", "--format", "json", ".").stdout)
    assert f"broken{NAME}" in {finding["path"] for finding in report["findings"]}
    sarif = json.loads(run(tree, "check", "--no-cache", "--format", "sarif", ".").stdout)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][0]["results"]
    }
    assert f"broken{NAME}" in {unquote(uri) for uri in uris}
    shown = in_terminal(tree, "check", "--no-cache", ".")
    assert f"broken{SHOWN}" in shown and "RC001" in shown
    no_controls(shown)


def test_check_notes_on_stderr(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / NAME)
    proc = run(tmp_path, "check", "--no-cache", ".")
    assert proc.returncode == 0, proc.stderr
    assert SHOWN in proc.stderr
    no_controls(proc.stderr)
    assert "\r" not in proc.stderr


def test_migrate_check_diff_and_terminal(tree: Path) -> None:
    proc = run(tree, "migrate", "--no-cache", "--check", NAME)
    assert proc.returncode == 1, proc.stderr
    no_controls(proc.stdout + proc.stderr)
    assert f"would migrate {SHOWN}" in proc.stdout.splitlines()
    assert f"{SHOWN}:48: MIG203 [super-dict]" in proc.stdout
    diff = run(tree, "migrate", "--no-cache", "--diff", NAME)
    no_controls(diff.stdout + diff.stderr)
    assert diff.stdout.startswith(f"--- a/{SHOWN}\n+++ b/{SHOWN}\n")
    shown = in_terminal(tree, "migrate", "--no-cache", "--check", NAME)
    assert f"would migrate {SHOWN}" in shown
    no_controls(shown)


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--config", "{name}.toml", "."],
        ["check", "{name}-missing.py"],
        ["config", "--config", "{name}.toml"],
        ["migrate", "--config", "{name}.toml", "."],
        ["fuzz", "--config", "{name}.toml", "m:C"],
        ["trace", "--config", "{name}.toml", "--", "true"],
    ],
    ids=lambda args: " ".join(a for a in args if "{" not in a),
)
def test_errors_naming_a_file(tmp_path: Path, args: list[str]) -> None:
    proc = run(tmp_path, *(a.format(name=NAME) for a in args))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"runnercheck: error: {SHOWN}")
    assert proc.stderr.count("\n") == 1
    no_controls(proc.stderr)


def test_usage_errors_and_unknown_rules(tmp_path: Path) -> None:
    proc = run(tmp_path, "check", f"--{NAME}", ".")
    assert proc.returncode == 2
    assert f"unrecognized arguments: --{SHOWN}" in proc.stderr
    no_controls(proc.stderr)
    proc = run(tmp_path, "rules", NAME)
    assert proc.returncode == 2
    assert proc.stderr == f"runnercheck: error: unknown rule '{SHOWN}' (see `runnercheck rules`)\n"


def test_mypy_gate(tmp_path: Path) -> None:
    (tmp_path / NAME).write_text('x: int = "s"\n')
    proc = run(tmp_path, "mypy", "--all", "--no-incremental", NAME)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{SHOWN}:1: error: Incompatible types in assignment" in proc.stdout
    no_controls(proc.stdout + proc.stderr)
