"""``runnercheck check`` starts fast: naming a command imports that command alone."""

from __future__ import annotations

import subprocess
import sys

from tests.check.conftest import FIXTURES, REPO


def imported(*args: str) -> tuple[int, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runnercheck", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    modules = {
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    return proc.returncode, modules


def test_check_imports_no_other_command() -> None:
    code, modules = imported("check", str(FIXTURES / "recursive-from-dict" / "bad.py"))
    assert code == 1
    assert "runnercheck.check.pipeline" in modules
    others = {
        "codemods.framework.registry",
        "codemods.facts.values",
        "codemods.facts.sources",
        "codemods.command_line",
        "mypy_plugin.command_line",
        "mypy_plugin.rules",
        "codemods.reasons",
        "runnercheck.commands.fuzz",
        "runnercheck.commands.rules",
        "runnercheck.demo.command",
    }
    assert modules & others == set()
    # runnercheck's own command is found without reading the installed metadata
    assert "importlib.metadata" not in modules
    heavy = {m.split(".")[0] for m in modules} & {"rich", "pydantic", "libcst", "mypy", "torch"}
    assert heavy == set()


def test_help_still_lists_every_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    for name in ("check", "migrate", "mypy", "fuzz", "trace", "demo", "rules", "config"):
        assert f"    {name} " in proc.stdout


def test_a_mistyped_command_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "chekc", "x.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "invalid choice: 'chekc'" in proc.stderr


def test_the_quick_exit_keeps_the_output_and_the_exit_status() -> None:
    bad = str(FIXTURES / "recursive-from-dict" / "bad.py")
    for args, code in ((["--no-cache", bad], 1), (["--no-cache", "--format", "json", bad], 1)):
        proc = subprocess.run(
            [sys.executable, "-m", "runnercheck", "check", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == code
        assert proc.stdout.endswith("\n") and proc.stderr == ""
        assert proc.stdout.count("RC101") == 2


def test_check_imports_what_this_run_uses() -> None:
    """``--no-cache`` imports no facts cache (pickle, temporary files); ``check`` never
    imports the readers of the shapes ``migrate`` plans from."""
    bad = str(FIXTURES / "recursive-from-dict" / "bad.py")
    code, uncached = imported("check", "--no-cache", bad)
    assert code == 1
    migrate_only = {"runnercheck.analysis.shapes", "runnercheck.analysis.requests"}
    assert uncached & ({"runnercheck.workspace.cache", "pickle"} | migrate_only) == set()
    code, cached = imported("check", bad)
    assert code == 1
    assert "runnercheck.workspace.cache" in cached
    assert cached & migrate_only == set()
