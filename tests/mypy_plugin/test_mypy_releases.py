"""The plugin's ways around what older mypy releases lack, run under the installed mypy.

mypy before 2.4 calls no hook once a module is checked: the plugin then appends a call
to each module that defines a class and does the module's end work in that call's
function hook (:mod:`mypy_plugin.compat`). Here the installed mypy is made to look like
such a release (the plugin's feature test answers no, its ``get_additional_indirect_deps``
does nothing): the classes mypy's class hook never shows, the dict values and the
dependencies an incremental run needs must come out as they do otherwise. (Under the
installed mypy the types of method bodies are not in the checker's type map yet when it
checks the module's last top-level statement, as they are under the releases before
2.4: a dict value read from a local variable cannot be typed there, so the ``cases``
fixture, which has such values, is left to ``scripts/mypy_versions.sh``, which runs
all of these under the real releases 1.9, 1.11, 1.15 and the newest; CI does.)
"""

from __future__ import annotations

from pathlib import Path

from tests.mypy_plugin.mypy_run import copy_fixture, expected, patched_mypy

BEFORE_2_4 = (
    "import mypy_plugin.hooks as hooks\n"
    "hooks.has_module_end_hook = lambda: False\n"
    "hooks.RunnercheckPlugin.get_additional_indirect_deps = lambda self, file: set()\n"
)


def test_class_kinds_and_settings_without_the_module_end_hook(tmp_path: Path) -> None:
    kinds = copy_fixture("kinds", tmp_path)
    files = ("contract.py", "constrained.py", "metaclasses.py", "only_meta.py", "exits.py")
    proc = patched_mypy(kinds, BEFORE_2_4, *files)
    assert (proc.stdout, proc.stderr) == (expected("kinds.txt"), "")
    wire = copy_fixture("pyproject", tmp_path)
    proc = patched_mypy(wire, BEFORE_2_4, "wire")
    assert (proc.stdout, proc.stderr) == (expected("pyproject.txt"), "")


def test_incremental_dependencies_without_the_module_end_hook(tmp_path: Path) -> None:
    """``final.py`` never imports ``inputs.py``: only the dependency the module's end
    records makes mypy check it again after ``inputs.py`` changes."""
    root = copy_fixture("incremental", tmp_path)
    files = ("base.py", "inputs.py", "mid.py", "final.py")
    first = patched_mypy(root, BEFORE_2_4, *files)
    assert (first.stdout, first.stderr) == ("Success: no issues found in 4 source files\n", "")
    inputs = root / "inputs.py"
    text = inputs.read_text(encoding="utf-8")
    text = text.replace(
        "    @classmethod\n    def from_broadcasted_tensor_dict(cls,",
        "    def from_broadcasted_tensor_dict(self,",
    ).replace("return cls(tensor_dict", "return type(self)(tensor_dict")
    inputs.write_text(text, encoding="utf-8")
    second = patched_mypy(root, BEFORE_2_4, *files)
    assert (second.stdout, second.stderr) == (expected("incremental_protocol.txt"), "")
