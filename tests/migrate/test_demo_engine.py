"""Behaviour, not just text: the shipped legacy engine, migrated, is clean for
``runnercheck check`` and the mypy plugin, and computes the same tokens at TP 2
with one broadcast per step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck import catalog
from runnercheck.check import check_paths
from runnercheck.demo.engine import engine_source_dir, run_engine
from tests.migrate.conftest import copy_tree

REPO = Path(__file__).resolve().parents[2]
MYPY_INI = """\
[mypy]
plugins = mypy_plugin
ignore_missing_imports = True
follow_imports = silent

[mypy-torch.*]
follow_imports = skip
"""
PLUGIN_CODES = {rule.name for rule in catalog.RULES if rule.engine == "mypy"}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runnercheck.cli import main

    root = tmp_path_factory.mktemp("demo")
    work = copy_tree(engine_source_dir("legacy"), root / "migrated_engine")
    assert main(["migrate", str(work)]) == 1
    return work


def test_check_finds_the_legacy_engine_paired_and_the_migrated_copy_clean(migrated: Path) -> None:
    legacy = check_paths([engine_source_dir("legacy")])
    assert {f.code for f in legacy.findings} == {"RC106"}
    assert check_paths([migrated]).findings == []


def test_mypy_plugin_reports_nothing_on_the_migrated_copy(migrated: Path) -> None:
    config = migrated.parent / "mypy.ini"
    config.write_text(MYPY_INI)
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file", str(config),
            "--cache-dir", str(migrated.parent / ".mypy_cache"), "--show-error-codes",
            migrated.name,
        ],
        cwd=migrated.parent, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert "runnercheck mypy plugin: error" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    flagged = [
        line for line in proc.stdout.splitlines() if any(f"[{c}]" in line for c in PLUGIN_CODES)
    ]
    assert flagged == []
    # the check can fail: a fixed-class return in the migrated code is flagged
    runner = migrated / "model_runner.py"
    text = runner.read_text()
    broken = text.replace("cls: Type[TModelRunnerInput],", "cls,", 1).replace(
        ") -> TModelRunnerInput:", ') -> "ModelRunnerInput":', 1
    )
    assert broken != text
    runner.write_text(broken)
    try:
        again = subprocess.run(
            [
                sys.executable, "-m", "mypy", "--config-file", str(config),
                "--cache-dir", str(migrated.parent / ".mypy_cache"), "--show-error-codes",
                migrated.name,
            ],
            cwd=migrated.parent, capture_output=True, text=True, timeout=300,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
    finally:
        runner.write_text(text)
    assert "[from-dict-fixed-return]" in again.stdout


@pytest.mark.parametrize("worker", ["default", "cpu"])
def test_migrated_engine_computes_the_same_tokens_with_one_broadcast(
    migrated: Path, worker: str
) -> None:
    legacy = run_engine("legacy", tp=2, steps=8, seed=3, worker=worker)
    merged = run_engine(None, tp=2, steps=8, seed=3, engine_dir=str(migrated), worker=worker)
    assert legacy["broadcasts_per_step"] == 2
    assert merged["broadcasts_per_step"] == 1
    assert merged["num_tokens"] == legacy["num_tokens"] > 0
    assert merged["tokens_sha256"] == legacy["tokens_sha256"]


@pytest.mark.slow
def test_migrated_embedding_engine_computes_the_same_embeddings(migrated: Path) -> None:
    legacy = run_engine("legacy", tp=2, steps=6, seed=1, embedding=True)
    merged = run_engine(None, tp=2, steps=6, seed=1, engine_dir=str(migrated), embedding=True)
    assert merged["broadcasts_per_step"] == 1
    assert merged["embeddings_sha256"] == legacy["embeddings_sha256"]


def test_migrated_input_classes_round_trip_through_a_real_broadcast(migrated: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "runnercheck", "fuzz", migrated.name, "--examples", "8",
            "--seed", "7", "--attn-backend",
            "runnercheck.demo.engine.attention:TinyAttentionBackend",
        ],
        cwd=migrated.parent, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": f"{REPO}:{migrated.parent}", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS ") == 5, proc.stdout
