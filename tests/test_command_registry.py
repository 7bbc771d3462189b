"""The commands of the packages above runnercheck (``migrate``, ``mypy``) are found
through their entry points (:mod:`runnercheck.commands.registry`); a command that is
not installed is one line naming it, and the others still run.

The environments without runnercheck's metadata are real ones: a Python without its
site directory (``-S``), with runnercheck's package and the installed dependencies on
``PYTHONPATH`` and, where a test says so, a distribution's metadata written beside them."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from importlib.metadata import distribution
from pathlib import Path

from runnercheck.commands import registry

REPO = Path(__file__).resolve().parent.parent
SITE = Path(sysconfig.get_paths()["purelib"])


def test_migrate_and_mypy_are_the_installed_entry_points() -> None:
    declared = distribution("runnercheck").entry_points.select(group=registry.GROUP)
    assert {entry.name: entry.value for entry in declared} == {
        "migrate": "codemods.command_line",
        "mypy": "mypy_plugin.command_line",
    }
    assert registry.load("migrate").__name__ == "codemods.command_line"
    assert registry.load("mypy").__name__ == "mypy_plugin.command_line"
    assert registry.names()[: len(registry.NAMES)] == registry.NAMES


def bare(tmp_path: Path, *packages: str) -> Path:
    """A folder of links to ``packages`` of this repository and to this environment's
    installed packages, runnercheck's own entries (its metadata among them) left out."""
    site = tmp_path / "site"
    site.mkdir()
    for name in packages:
        (site / name).symlink_to(REPO / name, target_is_directory=True)
    for entry in SITE.iterdir():
        if not entry.name.startswith(("runnercheck", "__editable__")) and entry.suffix != ".pth":
            (site / entry.name).symlink_to(entry)
    return site


def metadata(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def runnercheck(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``runnercheck ARGS`` under a Python that sees the standard library and ``site``
    (``-S``: not this environment's site directory)."""
    code = "import sys; from runnercheck.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-S", "-c", code, *args],
        cwd=site.parent,  # not the repository, whose runnercheck.egg-info names the commands
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(site), "NO_COLOR": "1", "COLUMNS": "100"},
    )


def test_a_command_without_its_entry_point_is_one_line(tmp_path: Path) -> None:
    site = bare(tmp_path, "runnercheck")
    for command in ("migrate", "mypy"):
        proc = runnercheck(site, command, "--help")
        assert proc.returncode == 2
        assert proc.stdout == ""
        assert proc.stderr.splitlines() == [
            f"runnercheck: error: the {command!r} command is not installed: no entry point "
            f"{command!r} in the group 'runnercheck.commands' (reinstall runnercheck)"
        ]
    # the others run, --help lists every command, and a mistyped one is still guessed
    assert runnercheck(site, "config", "--help").returncode == 0
    helped = runnercheck(site, "--help")
    assert helped.returncode == 0, helped.stderr
    listed = [line.split()[0] for line in helped.stdout.splitlines() if line.startswith("    ")]
    assert listed == list(registry.NAMES)
    said = {line.split()[0]: line.split(None, 1)[1] for line in helped.stdout.splitlines()
            if line.startswith("    ")}  # fmt: skip
    assert (said["migrate"], said["mypy"]) == ("(not installed)", "(not installed)")
    assert said["check"].startswith("check sources")
    typo = runnercheck(site, "migrat", "x")
    assert typo.returncode == 2
    assert typo.stderr.rstrip().endswith("(did you mean 'migrate'?)"), typo.stderr


def test_an_entry_point_whose_package_is_absent_is_one_line(tmp_path: Path) -> None:
    site = bare(tmp_path, "runnercheck")
    metadata(site, "runnercheck", "[runnercheck.commands]\nmigrate = codemods.command_line\n")
    proc = runnercheck(site, "migrate", "engine/")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "runnercheck: error: the 'migrate' command is not installed: its entry point names "
        "'codemods.command_line', which cannot be imported (No module named 'codemods')"
    ]


def test_another_distribution_adds_a_command(tmp_path: Path) -> None:
    site = bare(tmp_path, "runnercheck")
    metadata(site, "hello-runnercheck", "[runnercheck.commands]\nhello = hello_command\n")
    (site / "hello_command.py").write_text(
        '"""Say hello."""\n'
        "HELP = 'say hello'\n"
        "def configure(parser):\n"
        "    parser.add_argument('name')\n"
        "def run(args):\n"
        "    print(f'hello {args.name}')\n"
        "    return 1\n"
    )
    proc = runnercheck(site, "hello", "world")
    assert (proc.returncode, proc.stdout) == (1, "hello world\n"), proc.stderr
    helped = runnercheck(site, "--help")
    listed = [line.split()[0] for line in helped.stdout.splitlines() if line.startswith("    ")]
    assert listed == [*registry.NAMES, "hello"]
