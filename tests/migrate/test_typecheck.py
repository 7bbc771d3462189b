"""Plain mypy, under the target's own configuration, on the old and new texts of the
changed files: the errors the rewrite adds, at their lines in the new text."""

from __future__ import annotations

from pathlib import Path

from codemods.typecheck import mypy_config, new_errors

OLD = b"""\
from typing import Optional


def size(x: Optional[str]) -> int:
    return 1
"""
NEW = b"""\
from typing import Optional


def size(x: Optional[str]) -> int:
    y = 1
    return len(x) + y
"""


def test_a_new_error_is_reported_at_its_line_in_the_new_text(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mypy]\ncheck_untyped_defs = true\nfollow_imports = "skip"\n'
        'plugins = ["target_plugin"]\n'
    )
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "m.py"
    path.write_bytes(NEW)
    found = mypy_config(path)
    assert found is not None and "plugins" not in found[1]  # never the target's code
    errors = new_errors({path: (OLD, NEW)})
    assert [(e.path, e.line, e.code) for e in errors] == [(path, 6, "arg-type")]
    assert new_errors({path: (NEW, NEW)}) == []


def test_nothing_runs_without_a_mypy_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 80\n")
    assert mypy_config(tmp_path / "m.py") is None
    assert new_errors({tmp_path / "m.py": (OLD, NEW)}) == []


def test_a_created_file_importing_what_the_environment_lacks_adds_no_error(
    tmp_path: Path,
) -> None:
    """The created module imports the engine's tensor library, as the old files do; the
    environment mypy runs in lacks it: that is not the rewrite's error. A real error of
    the created file still is."""
    (tmp_path / "pyproject.toml").write_text("[tool.mypy]\ncheck_untyped_defs = true\n")
    (tmp_path / "pkg").mkdir()
    old_file, created = tmp_path / "pkg" / "worker.py", tmp_path / "pkg" / "worker_input.py"
    uses = (
        b"import absent_tensor_lib\n\n\ndef run(x: absent_tensor_lib.Tensor) -> None:\n    pass\n"
    )
    made = b"import absent_tensor_lib\n\nx: absent_tensor_lib.Tensor\n"
    for path, data in ((old_file, uses), (created, made)):
        path.write_bytes(data)
    assert new_errors({old_file: (uses, uses), created: (None, made)}) == []
    broken = made + b"y: int = 'no'\n"
    errors = new_errors({old_file: (uses, uses), created: (None, broken)})
    assert [(e.path, e.line, e.code) for e in errors] == [(created, 4, "assignment")]
