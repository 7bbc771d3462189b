"""Plain mypy, under the target's own configuration, on the old and new texts of the
changed files: the errors the rewrite adds, at their lines in the new text."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import uuid
from pathlib import Path

from codemods.framework.typecheck import (
    DEFAULT_CONFIG,
    _kept,
    mypy_config,
    mypy_settings,
    new_errors,
)
from codemods.framework.typecheck_results import ResultCache

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


UNTYPED_OLD = b"""\
def step(data):
    return data.get("n", 0)
"""
UNTYPED_NEW = b"""\
from typing import Optional


def swap(n: int) -> int:
    return n


def step(data):
    n: Optional[int] = data.get("n")
    return swap(n)
"""


def test_without_a_mypy_configuration_the_defaults_and_untyped_bodies_judge(
    tmp_path: Path,
) -> None:
    """A plain copy of a tree (no project file, no mypy configuration): mypy's defaults
    plus ``check_untyped_defs`` judge, so an error in the body of an unannotated
    function, as engine code mostly is, is new; relative to the top package."""
    package = tmp_path / "copy" / "engine" / "worker"
    package.mkdir(parents=True)
    for directory in (package, package.parent):
        (directory / "__init__.py").write_text("")
    path = package / "worker.py"
    path.write_bytes(UNTYPED_NEW)
    assert mypy_config(path) is None
    assert mypy_settings(path) == (tmp_path / "copy", DEFAULT_CONFIG)
    errors = new_errors({path: (UNTYPED_OLD, UNTYPED_NEW)})
    assert [(e.path, e.line, e.code) for e in errors] == [(path, 10, "arg-type")]
    assert new_errors({path: (UNTYPED_NEW, UNTYPED_NEW)}) == []


def test_a_project_without_mypy_settings_is_judged_by_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 80\n")
    assert mypy_config(tmp_path / "m.py") is None
    assert mypy_settings(tmp_path / "m.py") == (tmp_path.resolve(), DEFAULT_CONFIG)
    errors = new_errors({tmp_path / "m.py": (UNTYPED_OLD, UNTYPED_NEW)})
    assert [(e.line, e.code) for e in errors] == [(10, "arg-type")]


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


MOVED_OLD = b"""\
from typing import List


class Runner:
    def run(self, caches: List[int]) -> None:
        pass


def step(runner: Runner) -> None:
    caches = [None]
    runner.run(caches)
"""
MOVED_NEW = b"""\
from typing import List


class RunnerBase:
    def run(self, caches: List[int]) -> None:
        pass


class Runner(RunnerBase):
    pass


def step(runner: Runner) -> None:
    caches = [None]
    runner.run(caches)
"""


def test_an_error_whose_method_moved_to_a_base_is_not_new(tmp_path: Path) -> None:
    """The rewrite moves a runner's method into a generated base: mypy's message for the
    same bad call names the base now (``of "RunnerBase"``), which is not a new error;
    a new call's is."""
    (tmp_path / "pyproject.toml").write_text("[tool.mypy]\ncheck_untyped_defs = true\n")
    path = tmp_path / "m.py"
    path.write_bytes(MOVED_NEW)
    assert new_errors({path: (MOVED_OLD, MOVED_NEW)}) == []
    more = MOVED_NEW + b"    names = ['x']\n    runner.run(names)\n"
    errors = new_errors({path: (MOVED_OLD, more)})
    assert [(e.line, e.code) for e in errors] == [(17, "arg-type")]
    assert 'of "RunnerBase"' in errors[0].message


def test_a_judgement_is_kept_and_read_again_until_the_setting_changes(tmp_path: Path) -> None:
    """The same texts judged again in the same setting read the kept result (altered
    here, to see where it comes from); another file of the project changed, or another
    configuration, is a new setting that mypy judges again."""
    (tmp_path / "pyproject.toml").write_text("[tool.mypy]\ncheck_untyped_defs = true\n")
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "m.py"
    path.write_bytes(NEW)
    # a project of its own (files are known by content): judged for the first time
    (tmp_path / "pkg" / "stamp.py").write_text(f"STAMP = {str(uuid.uuid4())!r}\n")
    directory, config = mypy_settings(path)
    kept = ResultCache(config, directory, ["pkg"], _kept("results"))
    old, new = {Path("pkg/m.py"): OLD}, {Path("pkg/m.py"): NEW}
    assert kept.get(old) is None and kept.get(new) is None
    assert [(e.line, e.code) for e in new_errors({path: (OLD, NEW)})] == [(6, "arg-type")]
    assert kept.get(old) == []
    (judged,) = kept.get(new) or []
    assert (judged.path, judged.line, judged.code) == (Path("pkg/m.py"), 6, "arg-type")
    kept.put(new, [dataclasses.replace(judged, message="kept, not judged again")])
    again = new_errors({path: (OLD, NEW)})
    assert [(e.line, e.code, e.message) for e in again] == [
        (6, "arg-type", "kept, not judged again")
    ]
    (tmp_path / "pkg" / "other.py").write_text("X = 1\n")
    assert [(e.line, e.message) for e in new_errors({path: (OLD, NEW)})] == [(6, judged.message)]
    (tmp_path / "pyproject.toml").write_text("[tool.mypy]\n")
    assert [e.message for e in new_errors({path: (OLD, NEW)})] == [judged.message]
    assert kept.get(new) is not None  # (the other settings' results are kept apart)


def test_a_fifo_among_the_package_s_files_is_not_read(tmp_path: Path) -> None:
    """The kept judgements know a package's files by content: a FIFO named as a module
    is known by its kind, never opened for reading (that would wait for a writer)."""
    (tmp_path / "pkg").mkdir()
    path = tmp_path / "pkg" / "m.py"
    path.write_bytes(NEW)
    os.mkfifo(tmp_path / "pkg" / "pipe.py")
    script = (
        "import sys; from pathlib import Path; from codemods.framework.typecheck import new_errors; "
        "p = Path(sys.argv[1]); print(len(new_errors({p: (sys.argv[2].encode(), p.read_bytes())})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), OLD.decode()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
