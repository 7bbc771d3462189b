"""An absolute import names a module by its full dotted path: a file of the run with
the same last name in another package is not that module, and migrate's output never
imports from a package that does not hold the new module."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.framework.pipeline import MERGE, migrate
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from tests.migrate.conftest import FIXTURES, copy_tree

BEFORE = FIXTURES / "engine" / "before"
AFTER = FIXTURES / "engine" / "after"

#: A local module of the engine package with the last name of the toolkit's ``toy.comm``.
LOCAL_COMM = '''"""The engine's own wrapper of the step broadcast."""

from toy.comm import broadcast_tensor_dict


def broadcast_step(data):
    return broadcast_tensor_dict(data, src=0)
'''


def _project(root: Path, files: list[Path]) -> Project:
    return Project([extract_source(p.read_text(), str(p), names=True) for p in files])


def _packages(root: Path) -> tuple[Path, Path]:
    """``pkga`` and ``pkgb``, each with a ``sampling`` module; ``pkga.runner`` imports
    ``pkgb.sampling`` by its absolute name."""
    for name in ("pkga", "pkgb"):
        (root / name).mkdir()
        (root / name / "__init__.py").write_text("")
        (root / name / "sampling.py").write_text(f"class Sampling{name.upper()}:\n    pass\n")
    runner = root / "pkga" / "runner.py"
    runner.write_text("from pkgb.sampling import SamplingPKGB\n")
    return runner, root / "pkgb" / "sampling.py"


def test_an_absolute_import_is_not_a_same_named_module_of_another_package(
    tmp_path: Path,
) -> None:
    runner, other = _packages(tmp_path)
    local = tmp_path / "pkga" / "sampling.py"
    # only pkga is in the run: pkgb.sampling is not one of its files
    alone = _project(tmp_path, [runner, local])
    assert alone.module_file(str(runner), "pkgb.sampling", 0) is None
    # both packages: the import is pkgb's module, never pkga's
    both = _project(tmp_path, [runner, local, other])
    assert both.module_file(str(runner), "pkgb.sampling", 0) == str(other)
    # relative and same-package absolute imports still resolve
    assert both.module_file(str(runner), "sampling", 1) == str(local)
    assert both.module_file(str(runner), "pkga.sampling", 0) == str(local)


def test_loose_files_resolve_a_package_name_by_their_own_names(tmp_path: Path) -> None:
    """Files outside any package (a copy of a package's modules, without its
    ``__init__.py`` files) stand for the package's modules of the same names."""
    for name in ("worker.py", "model_runner.py"):
        (tmp_path / name).write_text("from engine.worker import model_runner\n")
    files = [tmp_path / "worker.py", tmp_path / "model_runner.py"]
    loose = _project(tmp_path, files)
    assert loose.module_file(str(files[0]), "engine.model_runner", 0) == str(files[1])
    (tmp_path / "__init__.py").write_text("")
    packaged = _project(tmp_path, files)
    # now a package with its own full name, which ``engine.model_runner`` is not
    assert packaged.module_file(str(files[0]), "engine.model_runner", 0) is None
    name = tmp_path.name
    assert packaged.module_file(str(files[0]), f"{name}.model_runner", 0) == str(files[1])


def test_migrate_imports_the_new_base_from_its_own_package(tmp_path: Path) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    (work / "comm.py").write_text(LOCAL_COMM)
    result = migrate([work], select=(MERGE,))
    assert result.refusals == []
    for name in ("cpu_model_runner.py", "model_runner.py"):
        text = result.changes[work / name].new.decode()
        assert "from toy.model_runner_base" not in text, name
        assert "from .model_runner_base import" in text, name
    assert (
        result.changes[work / "cpu_model_runner.py"].new
        == (AFTER / "cpu_model_runner.py").read_bytes()
    )


def test_import_paths_found_for_a_run_are_those_found_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``import_path`` with the run's ``ImportSites`` gives what it gives alone, for
    every origin and target in any order, and resolves each import of a module (a
    module several names are imported from included) at most once in the run."""
    from collections import Counter

    from codemods.merge_broadcasts.planned import ImportSites
    from codemods.merge_broadcasts.rewrite import import_path

    texts = {
        "pkg/__init__.py": "",
        "pkg/a.py": "import os\nfrom pkg.b import X, Y\nfrom pkg import c\n",
        "pkg/b.py": "X = Y = 1\n",
        "pkg/c.py": "from .b import X\nfrom .d import Z, W\n",
        "pkg/d.py": "Z = W = 2\n",
        "other/__init__.py": "",
        "other/e.py": "from pkg.a import X\n",
        "other/f.py": "",
        "other/g.py": "from other.f import thing\n",
    }
    for name, text in texts.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    files = [tmp_path / name for name in texts]
    project = _project(tmp_path, files)
    targets = [*files, tmp_path / "pkg" / "new_base.py", tmp_path / "other" / "new_input.py"]
    pairs = [(o, t) for o in files for t in targets if o != t]
    alone = {pair: import_path(project, *pair) for pair in pairs}
    assert alone[(tmp_path / "pkg/c.py", tmp_path / "pkg/new_base.py")] == ".new_base"
    assert alone[(tmp_path / "pkg/d.py", tmp_path / "pkg/new_base.py")] == "pkg.new_base"
    assert alone[(tmp_path / "other/e.py", tmp_path / "other/new_input.py")] == "other.new_input"
    assert alone[(tmp_path / "pkg/a.py", tmp_path / "pkg/new_base.py")] == "pkg.new_base"
    assert alone[(tmp_path / "other/f.py", tmp_path / "pkg/b.py")] == "pkg.b"
    resolved: Counter[tuple[str, str, int]] = Counter()
    real = project.module_file

    def counting(source: str, module: str, level: int) -> str | None:
        resolved[(source, module, level)] += 1
        return real(source, module, level)

    monkeypatch.setattr(project, "module_file", counting)
    for order in (pairs, pairs[::-1]):
        sites = ImportSites()
        resolved.clear()
        assert {pair: import_path(project, *pair, sites) for pair in order} == alone
        assert resolved and max(resolved.values()) == 1, resolved
