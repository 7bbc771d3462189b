"""Refusals leave whole groups byte-identical; bad files are reported and skipped;
links are not followed; bytes (encoding, newlines) are kept; writes keep the mode."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runnercheck.records import Change
from runnercheck.writes.transaction import commit
from tests.migrate import refusals
from tests.migrate.conftest import FIXTURES, copy_tree, snapshot

BEFORE = FIXTURES / "engine" / "before"
AFTER = FIXTURES / "engine" / "after"


@pytest.mark.parametrize("name", refusals.NAMES)
def test_refusal_leaves_every_file_byte_identical_and_names_the_reason(
    name: str, tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = refusals.write(name, tmp_path / name)
    expected = refusals.expected(name)
    before = snapshot(work)
    monkeypatch.chdir(work)
    result = migrate_cli(".")
    assert result.code == 1
    assert snapshot(work) == before
    reported = [line for line in result.out.splitlines() if ": MIG" in line]
    assert [line.replace(" [merge-broadcasts]", "") for line in reported] == expected


def test_a_file_that_does_not_parse_is_reported_and_the_others_proceed(
    tmp_path: Path, migrate_cli
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    broken = work / "broken_runner.py"
    broken.write_text("def prepare_input_tensors(self:\n    broadcast_tensor_dict({}, src=0)\n")
    result = migrate_cli(str(work))
    assert result.code == 1
    assert f"{broken}:1: RC001 [parse] does not parse" in result.out
    assert broken.read_text().startswith("def prepare_input_tensors(self:")
    after = snapshot(work)
    del after["broken_runner.py"]
    assert after == snapshot(AFTER)


def test_links_are_not_followed_out_of_the_given_paths(tmp_path: Path, migrate_cli) -> None:
    outside = copy_tree(BEFORE, tmp_path / "outside")
    work = tmp_path / "work"
    work.mkdir()
    (work / "elsewhere").symlink_to(outside, target_is_directory=True)
    (work / "runner_link.py").symlink_to(outside / "model_runner.py")
    result = migrate_cli(str(work))
    assert snapshot(outside) == snapshot(BEFORE)
    assert "MIG003" in result.out
    assert not (work / "model_runner_base.py").exists()


def test_encoding_newlines_and_untouched_lines_are_kept(tmp_path: Path, migrate_cli) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    runner = work / "model_runner.py"
    text = runner.read_text()
    latin = "# -*- coding: latin-1 -*-\n# caf\xe9: a latin-1 comment\n" + text
    runner.write_bytes(latin.replace("\n", "\r\n").encode("latin-1"))
    assert migrate_cli(str(work)).code == 0
    data = runner.read_bytes()
    assert data.startswith(b"# -*- coding: latin-1 -*-\r\n# caf\xe9: a latin-1 comment\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")
    expected = (AFTER / "model_runner.py").read_text()
    assert data.decode("latin-1").replace("\r\n", "\n").endswith(expected)


def test_untouched_classes_stay_byte_identical(tmp_path: Path, migrate_cli) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    helper = "\n\nclass Unrelated:   # odd   spacing   kept\n    def f(self):  return  {'a' :1}\n"
    runner = work / "model_runner.py"
    runner.write_text(runner.read_text() + helper)
    migrate_cli(str(work))
    assert runner.read_text().endswith(helper)


def test_writes_keep_the_mode_and_refuse_changed_or_outside_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    target = root / "a.py"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o640)
    outcome = commit([Change(target, b"old\n", b"new\n")], [root])
    assert outcome.written == [target] and target.read_bytes() == b"new\n"
    assert (target.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in root.iterdir()] == ["a.py"]  # no journal or temporary file left
    outcome = commit([Change(target, b"old\n", b"newer\n")], [root])
    assert outcome.written == [] and [r.code for r in outcome.refused] == ["MIG005"]
    assert "changed on disk" in outcome.refused[0].message
    outside = tmp_path / "outside.py"
    outside.write_bytes(b"x\n")
    group = [
        Change(target, b"new\n", b"newest\n", "G"),
        Change(outside, b"x\n", b"y\n", "G"),
    ]
    outcome = commit(group, [root])
    assert [r.code for r in outcome.refused] == ["MIG003"]
    assert "outside the given paths" in outcome.refused[0].message
    assert target.read_bytes() == b"new\n" and outside.read_bytes() == b"x\n"


def test_given_files_may_get_a_new_base_module_in_their_package(
    tmp_path: Path, migrate_cli
) -> None:
    """A file given alone stands for its group: the new model_runner_base.py beside it
    is written (tests/migrate/test_files.py has the rest); the other group is not."""
    work = copy_tree(BEFORE, tmp_path / "engine")
    names = ("worker.py", "model_runner.py", "pooling_model_runner.py")
    result = migrate_cli(*(str(work / n) for n in names))
    assert result.code == 0, result.out
    assert "MIG108" not in result.out
    after = snapshot(work)
    assert after["model_runner_base.py"] == (AFTER / "model_runner_base.py").read_bytes()
    assert after["cpu_worker.py"] == (BEFORE / "cpu_worker.py").read_bytes()


def test_a_planner_failure_refuses_only_its_group(tmp_path: Path, migrate_cli, monkeypatch) -> None:
    """Fault injection: the planner raising on one runner leaves that group
    byte-identical (MIG199) and the other group is still migrated."""
    from codemods.merge_broadcasts import groups

    real = groups.plan_legacy_method

    def failing(plan, method, *args):  # type: ignore[no-untyped-def]
        if plan.name == "CPUModelRunner":
            raise RuntimeError("injected")
        return real(plan, method, *args)

    monkeypatch.setattr(groups, "plan_legacy_method", failing)
    work = copy_tree(BEFORE, tmp_path / "engine")
    result = migrate_cli(str(work))
    assert result.code == 1
    assert "MIG199 [merge-broadcasts] CPUWorker/CPUModelRunner: internal error" in result.out
    for name in ("cpu_worker.py", "cpu_model_runner.py"):
        assert (work / name).read_bytes() == (BEFORE / name).read_bytes()
    for name in ("model_runner.py", "pooling_model_runner.py", "model_runner_base.py"):
        assert (work / name).read_bytes() == (AFTER / name).read_bytes(), name
    # the refused CPU worker shares nothing: the GPU worker keeps an input of its own
    worker = (work / "worker.py").read_text()
    assert "class WorkerInput:" in worker and "worker_input = WorkerInput(" in worker
    assert not (work / "worker_input.py").exists()
