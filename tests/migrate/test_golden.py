"""merge-broadcasts on the fixture engine: golden files, idempotency, modes, output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.migrate.conftest import FIXTURES, copy_tree, snapshot

BEFORE = FIXTURES / "engine" / "before"
AFTER = FIXTURES / "engine" / "after"


def test_rewrite_matches_the_golden_files_byte_for_byte(tmp_path: Path, migrate_cli) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    result = migrate_cli(str(work))
    assert result.code == 0, result.err
    assert snapshot(work) == snapshot(AFTER)


def test_second_run_changes_nothing(tmp_path: Path, migrate_cli) -> None:
    work = copy_tree(AFTER, tmp_path / "engine")
    before = snapshot(work)
    result = migrate_cli(str(work))
    assert result.code == 0, result.out + result.err
    assert snapshot(work) == before
    assert "one broadcast per step already: left alone" in result.out


def test_comments_inside_rewritten_methods_survive() -> None:
    for name, comments in {
        "model_runner.py": [
            "# Tensors first, then what the sampler needs.",
            "# What is left builds the attention metadata.",
            "# Run the model on every rank.",
            "# driver only",
        ],
        "worker.py": [
            "# Stop signal: the other ranks leave their loop.",
            "# The worker's own dict.",
            "# swapped before the model runs",
            "# Nothing scheduled: do not run the model.",
        ],
        "pooling_model_runner.py": [
            "# Pooling needs the sequence data, which only the driver has."
        ],
    }.items():
        before = (BEFORE / name).read_text()
        after = (AFTER / name).read_text()
        for comment in comments:
            assert comment in before and comment in after, (name, comment)


def test_check_mode_writes_nothing_names_each_file_and_exits_1(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    before = snapshot(work)
    monkeypatch.chdir(tmp_path)
    result = migrate_cli("--check", "engine")
    assert result.code == 1
    assert snapshot(work) == before
    assert "would change" in result.out
    # one line per file, as black's "would reformat X"
    named = sorted(line for line in result.out.splitlines() if line.startswith("would "))
    changed = sorted(name for name in snapshot(AFTER) if snapshot(AFTER)[name] != before.get(name))
    expected = sorted(
        f"would {'migrate' if name in before else 'create'} engine/{name}" for name in changed
    )
    assert named == expected and len(named) >= 2
    copy_tree(AFTER, tmp_path / "clean")
    again = migrate_cli("--check", "clean")
    assert again.code == 0 and "would migrate" not in again.out


def test_a_clean_write_exits_0_and_names_each_file(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    monkeypatch.chdir(tmp_path)
    result = migrate_cli("engine")
    assert result.code == 0, result.out
    written = {line.split(" ", 1)[1] for line in result.out.splitlines()
               if line.startswith(("migrated ", "created "))}  # fmt: skip
    assert "created engine/model_runner_base.py" in result.out
    changed = {f"engine/{n}" for n, data in snapshot(work).items()
               if (BEFORE / n).exists() is False or (BEFORE / n).read_bytes() != data}  # fmt: skip
    assert written == changed


def test_diff_mode_prints_a_patch_that_produces_the_golden_files(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    monkeypatch.chdir(tmp_path)
    result = migrate_cli("--diff", "engine")
    assert result.code == 1
    assert snapshot(work) == snapshot(BEFORE)  # nothing written
    assert result.out.startswith("--- a/engine/")
    assert "+++ b/engine/model_runner_base.py" in result.out
    patch = tmp_path / "migrate.patch"
    patch.write_text(result.out)
    applied = subprocess.run(
        ["git", "apply", "--unsafe-paths", str(patch)], cwd=tmp_path, capture_output=True, text=True
    )
    assert applied.returncode == 0, applied.stderr
    assert snapshot(work) == snapshot(AFTER)


def test_json_report_names_the_groups_keys_and_dropped_duplicates(
    tmp_path: Path, migrate_cli
) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    data = json.loads(migrate_cli("--check", "--format", "json", str(work)).out)
    assert data["mode"] == "check"
    assert data["refusals"] == []
    groups = {g["group"]: g for g in data["groups"]}
    gpu = groups["Worker/PoolingModelRunner/ModelRunner"]
    assert gpu["worker_keys"] == {"Worker": ["num_seq_groups", "blocks_to_swap"]}
    runners = {r["runner"]: r for r in gpu["runners"]}
    assert runners["ModelRunner"]["keys"] == ["input_tokens", "selected_token_indices"]
    assert [d["key"] for d in runners["ModelRunner"]["dropped"]] == ["slot_mapping", "num_prefills"]
    assert "attn_metadata" in runners["ModelRunner"]["dropped"][0]["why"]
    assert runners["PoolingModelRunner"]["driver_only"] == ["pooling_metadata"]
    cpu = groups["CPUWorker/CPUModelRunner"]
    assert cpu["runners"][0]["driver_only"] == ["image_inputs"]
    # five rewritten, the base module and the shared worker input created
    assert data["summary"]["merge-broadcasts"] == {"changed": 7, "refused": 0, "unchanged": 1}


def test_parallel_jobs_give_the_same_result(tmp_path: Path, migrate_cli) -> None:
    work = copy_tree(BEFORE, tmp_path / "engine")
    assert migrate_cli("-j", "2", str(work)).code == 0
    assert snapshot(work) == snapshot(AFTER)


def test_usage_errors_exit_2(tmp_path: Path, migrate_cli) -> None:
    missing = migrate_cli(str(tmp_path / "nope"))
    assert missing.code == 2 and "no such file or directory" in missing.err
    bad = migrate_cli("--select", "merge-broadcasts,bogus", str(tmp_path))
    assert bad.code == 2 and "unknown codemod 'bogus'" in bad.err
    assert migrate_cli("-j", "-1", str(tmp_path)).code == 2


def test_help_documents_the_exit_codes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "0 nothing to change, or every change written; 1 with --check or --diff" in text
    assert "2 usage or input error" in text


def test_parallel_jobs_report_in_the_order_of_a_serial_run(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    """Whichever group's process finishes first, ``-j`` reports what a serial run reports,
    in the same order (here the pool's results come last submitted first)."""
    import concurrent.futures

    work = copy_tree(BEFORE, tmp_path / "engine")
    serial = migrate_cli("--diff", str(work))
    assert serial.code == 1 and serial.err.count("\n") >= 2

    def last_first(futures):  # type: ignore[no-untyped-def]
        futures = list(futures)
        concurrent.futures.wait(futures)
        return reversed(futures)

    monkeypatch.setattr(concurrent.futures, "as_completed", last_first)
    parallel = migrate_cli("--diff", "-j", "2", str(work))
    assert (parallel.code, parallel.out, parallel.err) == (serial.code, serial.out, serial.err)
