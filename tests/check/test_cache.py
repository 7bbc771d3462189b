"""The facts cache of ``check``: keyed by content, version and configuration; safe to
corrupt and to share between concurrent runs; bypassed with ``--no-cache``."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.check import check_paths
from runnercheck.config import Config
from runnercheck.contract import Contract
from runnercheck.workspace.cache import CACHE_DIR, FACTS_DIR, MAGIC, FactsCache
from tests.check.conftest import FIXTURES, REPO

BAD = FIXTURES / "recursive-from-dict" / "bad.py"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.runnercheck]\n", encoding="utf-8")
    shutil.copy(BAD, tmp_path / "runner.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def entries(root: Path) -> list[Path]:
    directory = root / CACHE_DIR / FACTS_DIR
    return sorted(directory.iterdir()) if directory.is_dir() else []


def codes(root: Path, config: Config | None = None) -> list[str]:
    result = check_paths(["runner.py"], config, root=root, cache_root=root)
    return [f.code for f in result.findings]


def test_a_second_run_is_served_from_the_cache(project: Path) -> None:
    cache = FactsCache(project, Contract())
    data = (project / "runner.py").read_bytes()
    first = cache.facts(data, "runner.py", Contract())
    again = FactsCache(project, Contract())
    second = again.facts(data, "runner.py", Contract())
    assert (cache.misses, cache.hits, again.misses, again.hits) == (1, 0, 0, 1)
    assert second == first
    assert (project / CACHE_DIR / ".gitignore").read_text(encoding="utf-8").endswith("*\n")


def test_findings_are_the_same_from_the_cache(project: Path) -> None:
    cold = codes(project)
    assert cold == ["RC101", "RC101"]
    stored = entries(project)
    assert len(stored) == 1
    stamp = stored[0].stat().st_mtime_ns
    assert codes(project) == cold
    assert entries(project) == stored and stored[0].stat().st_mtime_ns == stamp


def test_a_changed_file_is_read_again(project: Path) -> None:
    assert codes(project) == ["RC101", "RC101"]
    source = project / "runner.py"
    text = source.read_text(encoding="utf-8")
    fixed = text.replace(
        "return cls.from_broadcasted_tensor_dict(tensor_dict)", "return cls(**tensor_dict)", 1
    )
    assert fixed != text
    source.write_text(fixed, encoding="utf-8")
    assert codes(project) == ["RC101"]
    assert len(entries(project)) == 2


def test_a_changed_configuration_or_version_is_a_miss(project: Path) -> None:
    data = (project / "runner.py").read_bytes()
    FactsCache(project, Contract(), version="1").facts(data, "runner.py", Contract())
    other = Contract(driver_flag="is_leader")
    for cache in (FactsCache(project, other, version="1"), FactsCache(project, Contract(), "2")):
        cache.facts(data, "runner.py", Contract())
        assert (cache.hits, cache.misses) == (0, 1)
    same = FactsCache(project, Contract(), version="1")
    same.facts(data, "runner.py", Contract())
    assert (same.hits, same.misses) == (1, 0)
    assert len(entries(project)) == 3


def test_corrupt_or_truncated_entries_are_misses(project: Path) -> None:
    expected = codes(project)
    [entry] = entries(project)
    whole = entry.read_bytes()
    for damaged in (b"", whole[: len(whole) // 2], MAGIC + b"\x80\x05garbage", b"junk" + whole):
        entry.write_bytes(damaged)
        assert codes(project) == expected
        assert entry.read_bytes() == whole  # rewritten whole


def test_a_planted_entry_runs_nothing(project: Path) -> None:
    data = (project / "runner.py").read_bytes()
    cache = FactsCache(project, Contract())
    key = cache.key(data, "runner.py")
    witness = project / "ran"

    class Planted:
        def __reduce__(self) -> tuple[object, ...]:
            return (os.system, (f"touch {witness}",))

    cache.directory.mkdir(parents=True)
    (cache.directory / key).write_bytes(MAGIC + pickle.dumps(Planted()))
    facts = cache.facts(data, "runner.py", Contract())
    assert not witness.exists()
    assert cache.misses == 1 and facts.classes


def test_no_cache_writes_nothing_and_concurrent_runs_agree(project: Path) -> None:
    command = [sys.executable, "-m", "runnercheck", "check"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    bypass = subprocess.run(
        [*command, "--no-cache", "runner.py"], cwd=project, capture_output=True, text=True, env=env
    )
    assert bypass.returncode == 1 and not (project / CACHE_DIR).exists()
    running = [
        subprocess.Popen(
            [*command, "runner.py"], cwd=project, stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(4)
    ]
    outputs = [(proc.communicate(timeout=60)[0], proc.returncode) for proc in running]
    assert outputs == [(bypass.stdout, 1)] * 4
    assert len(entries(project)) == 1
    assert [p.name for p in (project / CACHE_DIR / FACTS_DIR).iterdir()] == [
        entries(project)[0].name
    ]
