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
#: the configuration the README shows and ``runnercheck demo`` uses: real torch types
MYPY_INI = "[mypy]\nplugins = mypy_plugin\n"
PLUGIN_CODES = {rule.name for rule in catalog.for_tool("mypy")}


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runnercheck.cli import main

    root = tmp_path_factory.mktemp("demo")
    work = copy_tree(engine_source_dir("legacy"), root / "migrated_engine")
    assert main(["migrate", str(work)]) == 0
    return work


def test_check_finds_the_legacy_engine_paired_and_the_migrated_copy_clean(migrated: Path) -> None:
    legacy = check_paths([engine_source_dir("legacy")])
    assert {f.code for f in legacy.findings} == {"RC106"}
    assert check_paths([migrated]).findings == []


def _mypy(package: Path) -> subprocess.CompletedProcess[str]:
    """mypy with the plugin and nothing else on ``package`` (run from its parent)."""
    config = package.parent / "mypy.ini"
    config.write_text(MYPY_INI)
    return subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file", str(config),
            "--cache-dir", str(package.parent / ".mypy_cache"), "--show-error-codes",
            package.name,
        ],
        cwd=package.parent, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.slow
def test_the_legacy_engine_is_type_clean_with_real_torch_types(tmp_path: Path) -> None:
    legacy = copy_tree(engine_source_dir("legacy"), tmp_path / "legacy_engine")
    proc = _mypy(legacy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("Success: no issues found"), proc.stdout


@pytest.mark.slow
def test_mypy_plugin_reports_nothing_on_the_migrated_copy(migrated: Path) -> None:
    proc = _mypy(migrated)
    assert "runnercheck mypy plugin: error" not in proc.stderr, proc.stderr
    # not only the plugin: the generated code type-checks against real torch types
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
        again = _mypy(migrated)
    finally:
        runner.write_text(text)
    assert "[from-dict-fixed-return]" in again.stdout


def test_the_gpu_and_cpu_inputs_share_the_sampling_metadata_helpers(migrated: Path) -> None:
    """The legacy GPU and CPU runners send and rebuild the sampling metadata alike: both
    inputs call one pair of helpers of the base module (which the token runs below
    then execute on every rank, the rebuild importing ``SamplingMetadata`` itself)."""
    base = (migrated / "model_runner_base.py").read_text()
    helpers = (
        "_add_sampling_metadata_broadcastable_dict",
        "_init_sampling_metadata_from_tensor_dict",
    )
    for helper in helpers:
        assert base.count(f"\ndef {helper}(") == 1, helper
        for name in ("model_runner.py", "cpu_model_runner.py"):
            assert f"{helper}(" in (migrated / name).read_text(), (helper, name)
    assert "\n    from runnercheck.demo.engine.sampling import SamplingMetadata\n" in base


@pytest.mark.slow
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


@pytest.mark.slow
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
    # three runner inputs and the one input both workers share, then the worker input
    # merged with each runner's input, as the composed step each worker runs (one line
    # each, then the sweep's table)
    passed = [line for line in proc.stdout.splitlines() if line.endswith(" examples)")]
    assert len(passed) == 7, proc.stdout
    assert all(line.startswith("PASS ") for line in passed), proc.stdout
    assert "PASS migrated_engine.worker_input:WorkerInput " in proc.stdout
    for runner_input in ("model_runner:ModelRunnerInput", "cpu_model_runner:CPUModelRunnerInput"):
        step = f"migrated_engine.worker_input:WorkerInput+migrated_engine.{runner_input}"
        assert f"PASS {step}  (8 examples)" in passed, proc.stdout


def test_generated_code_narrows_the_received_dict_where_the_legacy_code_did(
    migrated: Path,
) -> None:
    """The legacy non-driver branches narrow the broadcast's Optional result; the
    classmethod that replaces them takes a dict (no check moves there), and the CPU
    worker, which rebuilds the model input past its driver split, says it is not None."""
    for name, input_class in [
        ("model_runner.py", "ModelRunnerInput"),
        ("cpu_model_runner.py", "CPUModelRunnerInput"),
        ("embedding_model_runner.py", "EmbeddingModelRunnerInput"),
    ]:
        legacy = (engine_source_dir("legacy") / name).read_text()
        assert "assert broadcast_data is not None" in legacy
        text = (migrated / name).read_text()
        classmethod = text.split(f"class {input_class}(")[1].split("\nclass ")[0]
        assert "from_broadcasted_tensor_dict(" in classmethod
        assert "assert " not in classmethod and "broadcast_data" not in classmethod
    worker = (migrated / "cpu_worker.py").read_text()
    assert (
        "        if not self.is_driver_worker:\n"
        "            assert broadcast_data is not None\n"
        "            model_input = (\n"
        "                self.model_runner\n"
        "                .make_model_input_from_broadcasted_tensor_dict(broadcast_data)\n"
        "            )\n"
    ) in worker
    # the embedding runner takes its own input: it derives from the runner's generic
    # base, so no contract method narrows an override
    embedding = (migrated / "embedding_model_runner.py").read_text()
    runner = (migrated / "model_runner.py").read_text()
    legacy_embedding = (engine_source_dir("legacy") / "embedding_model_runner.py").read_text()
    ignores = "# type: ignore[override]"
    assert embedding.count(ignores) <= legacy_embedding.count(ignores)  # none added
    assert f"def make_model_input_from_broadcasted_tensor_dict(  {ignores}" not in embedding
    assert "class EmbeddingModelRunner(GenericModelRunner[EmbeddingModelRunnerInput]):" in embedding
    assert "class GenericModelRunner(ModelRunnerBase[TInput]):" in runner
    assert "class ModelRunner(GenericModelRunner[ModelRunnerInput]):" in runner
    # the worker picks one of the two runners: the class it holds is typed with the
    # generic base, and the conditional expression (whose two arms a type checker joins
    # to ``object`` before reading the annotation) became a default and an ``if``
    assert (
        "        ModelRunnerClass: Type[GenericModelRunner] = ModelRunner\n"
        "        if self.model_config.embedding_mode:\n"
        "            ModelRunnerClass = EmbeddingModelRunner\n"
        "        self.model_runner: GenericModelRunner = ModelRunnerClass(\n"
    ) in (migrated / "worker.py").read_text()
