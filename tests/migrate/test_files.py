"""`runnercheck migrate` on single files, as pre-commit passes them: each file stands
for its worker/runner group, read from its package on disk, and that group (only) is
judged or rewritten; nothing asks for a directory."""

from __future__ import annotations

from pathlib import Path

from tests.migrate.conftest import FIXTURES, copy_tree, snapshot

BEFORE = FIXTURES / "engine" / "before"
AFTER = FIXTURES / "engine" / "after"
CPU_GROUP = ("cpu_worker.py", "cpu_model_runner.py")
GPU_GROUP = ("worker.py", "model_runner.py", "pooling_model_runner.py")


def named(out: str) -> set[str]:
    return {
        line for line in out.splitlines() if line.startswith(("would ", "migrated ", "created "))
    }


def test_check_on_one_file_judges_its_whole_group(tmp_path: Path, migrate_cli, monkeypatch) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    before = snapshot(work)
    monkeypatch.chdir(tmp_path)
    for given in CPU_GROUP:
        result = migrate_cli("--check", f"engine/{given}")
        assert result.code == 1, result.out
        assert ": MIG" not in result.out and "directory" not in result.out, result.out
        assert named(result.out) == {
            "would migrate engine/cpu_worker.py",
            "would migrate engine/cpu_model_runner.py",
            "would create engine/model_runner_base.py",
            "would create engine/worker_input.py",
        }
    result = migrate_cli("--check", "engine/pooling_model_runner.py")
    assert result.code == 1 and ": MIG" not in result.out, result.out
    assert {line.split()[-1] for line in named(result.out)} == {
        f"engine/{name}" for name in (*GPU_GROUP, "model_runner_base.py", "worker_input.py")
    }
    assert snapshot(work) == before


def test_write_on_one_file_rewrites_its_group_and_nothing_else(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    monkeypatch.chdir(tmp_path)
    result = migrate_cli("engine/cpu_model_runner.py")
    assert result.code == 0, result.out
    after = snapshot(work)
    for name in (*CPU_GROUP, "model_runner_base.py", "worker_input.py"):
        assert after[name] == (AFTER / name).read_bytes(), name
    for name in (*GPU_GROUP, "__init__.py"):
        assert after[name] == (BEFORE / name).read_bytes(), name
    # the group is done: its files pass, the other group's files still would change
    assert migrate_cli("--check", "engine/cpu_worker.py").code == 0
    rest = migrate_cli("--check", "engine/worker.py")
    assert rest.code == 1 and "would migrate engine/worker.py" in rest.out, rest.out
    assert migrate_cli("engine/worker.py").code == 0
    assert snapshot(work) == snapshot(AFTER)


def test_a_file_outside_any_group_is_left_alone_without_a_refusal(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    (work / "util.py").write_text("def helper() -> int:\n    return 1\n")
    before = snapshot(work)
    monkeypatch.chdir(tmp_path)
    result = migrate_cli("--check", "engine/util.py", "engine/__init__.py")
    assert result.code == 0, result.out
    assert named(result.out) == set()
    assert snapshot(work) == before
