"""The codemod registry is the one list: every entry names a real LibCST command, the
CLI accepts exactly its names, and the pipeline runs them in its order."""

from __future__ import annotations

import importlib
import subprocess
import sys

from libcst.codemod import CodemodCommand

from codemods.framework import registry
from codemods.framework.pipeline import CODEMODS


def test_every_entry_names_its_libcst_command() -> None:
    for codemod in registry.CODEMODS:
        module = importlib.import_module(codemod.module)
        command = getattr(module, codemod.command)
        assert issubclass(command, CodemodCommand)
        assert command.DESCRIPTION == codemod.summary
        assert module.NAME == codemod.name


def test_the_pipeline_and_the_cli_use_the_registry() -> None:
    assert CODEMODS == registry.NAMES
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", "--select", "nope", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert ", ".join(registry.NAMES) in proc.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    for codemod in registry.CODEMODS:
        assert f"  {codemod.name} " in help_text
