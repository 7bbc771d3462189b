"""Every class is checked: over constrained type variables (each constraint), with a
metaclass other than ABCMeta (an ABCMeta subclass too), defined inside a function
(also one whose body mypy does not check), alone in a module where mypy's class hook
never runs, and in a module whose top level ends in ``sys.exit()``, in a cold run and
in an incremental run that re-checks one module alone."""

from __future__ import annotations

from pathlib import Path

from tests.mypy_plugin.mypy_run import copy_fixture, expected, mypy

FILES = ("contract.py", "constrained.py", "metaclasses.py", "only_meta.py", "exits.py")


def test_every_kind_of_class_is_checked(tmp_path: Path) -> None:
    root = copy_fixture("kinds", tmp_path)
    cold = mypy(root, *FILES)
    assert (cold.stdout, cold.stderr, cold.returncode) == (expected("kinds.txt"), "", 1)
    # Only the module whose one class has a custom metaclass changes: no other class
    # is checked in this run, and its error must still be there.
    lone = root / "only_meta.py"
    lone.write_text(lone.read_text().replace("A module", "The module"))
    warm = mypy(root, *FILES)
    assert warm.stderr == ""
    assert sorted(warm.stdout.splitlines()) == sorted(cold.stdout.splitlines())


def test_constrained_runner_without_problems_is_silent(tmp_path: Path) -> None:
    root = copy_fixture("kinds", tmp_path)
    half = root / "constrained.py"
    half.write_text(
        half.read_text().replace('"D", StepInput, SendOnly', '"D", StepInput, DecodeInput')
    )
    proc = mypy(root, "contract.py", "constrained.py")
    assert (proc.stdout, proc.stderr) == ("Success: no issues found in 2 source files\n", "")
