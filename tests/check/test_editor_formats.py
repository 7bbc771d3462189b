"""``check --format github`` (workflow annotations) and ``check --stdin-filename PATH -``
(an editor's buffer), run as the real command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.github import annotation, escape_data, escape_property

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ROOT / "runnercheck" / "demo" / "engine" / "legacy"
#: A workflow command as the Actions runner reads one: ``::level props::message``; a
#: property value holds no unescaped ``,`` or ``:`` and no line break.
COMMAND = re.compile(
    r"::(error|warning|notice)"
    r"(?: (?:file|line|col|endLine|endColumn|title)=[^,:\r\n]*"
    r"(?:,(?:file|line|col|endLine|endColumn|title)=[^,:\r\n]*)*)?"
    r"::[^\r\n]*"
)


def cli(cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    return Path(shutil.copytree(LEGACY, tmp_path / "engine"))


def test_github_annotations_follow_the_workflow_command_syntax(engine: Path) -> None:
    done = cli(engine.parent, "check", "--no-cache", "--format", "github", "engine")
    assert done.returncode == 1
    lines = done.stdout.decode().splitlines()
    annotations = [line for line in lines if line.startswith("::")]
    assert len(annotations) == 3 and lines[-1].startswith("Found 3 findings")
    for line in annotations:
        assert COMMAND.fullmatch(line), line
        assert line.startswith("::error file=engine/") and ",title=RC106 paired-broadcast::" in line


def test_github_escapes_what_would_end_a_value_or_the_line() -> None:
    line = annotation("error", "50% done\nnext", "a,b:c.py", 3, 1, "RC1 x:y")
    assert COMMAND.fullmatch(line), line
    assert line == "::error file=a%2Cb%3Ac.py,line=3,col=1,title=RC1 x%3Ay::50%25 done%0Anext"
    assert escape_data("\r") == "%0D" and escape_property(",") == "%2C"


def test_a_buffer_on_stdin_is_checked_as_its_file_with_its_neighbours_from_disk(
    engine: Path,
) -> None:
    on_disk = cli(engine, "check", "--no-cache", "cpu_worker.py")
    assert on_disk.returncode == 1 and b"RC106" in on_disk.stdout
    edited = (
        (engine / "cpu_worker.py")
        .read_bytes()
        .replace(b"broadcast_tensor_dict(", b"do_not_broadcast(")
    )
    buffered = cli(
        engine, "check", "--no-cache", "--stdin-filename", "cpu_worker.py", "-", stdin=edited
    )
    assert buffered.returncode == 0, buffered.stdout + buffered.stderr
    assert b"No findings (1 file seen, 1 parsed" in buffered.stdout
    same = cli(
        engine,
        "check",
        "--no-cache",
        "--stdin-filename",
        "cpu_worker.py",
        "-",
        stdin=(engine / "cpu_worker.py").read_bytes(),
    )
    assert same.stdout == on_disk.stdout and same.returncode == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-"], b"--stdin-filename PATH"),
        (["--stdin-filename", "x.py", "engine"], b"give `-` as the path"),
        (["--stdin-filename", "x.py", "-", "engine"], b"give no other path"),
        (["--stdin-filename", "nowhere/x.py", "-"], b"its directory does not exist"),
    ],
)
def test_stdin_usage_errors_are_one_line(engine: Path, args: list[str], message: bytes) -> None:
    done = cli(engine.parent, "check", *args, stdin=b"")
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.splitlines()) == 1


def test_migrate_check_in_github_format_names_each_file_and_refusal(engine: Path) -> None:
    done = cli(engine.parent, "migrate", "--check", "--format", "github", "engine")
    assert done.returncode == 1
    lines = done.stdout.decode().splitlines()
    assert lines[-1].endswith("0 refused or skipped")
    annotations = lines[:-1]
    assert annotations and all(COMMAND.fullmatch(line) for line in annotations), annotations
    assert any(
        line.startswith("::error file=engine/worker.py,title=runnercheck migrate::would migrate")
        for line in lines
    )
    assert any(line.startswith("::error file=engine/model_runner_base.py,") for line in lines)
