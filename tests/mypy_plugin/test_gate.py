"""`runnercheck mypy`, the CI gate: on a copy of the demo's merged engine with one
contract error, one error of mypy's own and an import mypy cannot find, it fails on the
contract's code only; with a baseline, on new errors only. Real mypy, real plugin."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.demo.engine import engine_source_dir

# torch is skipped to keep the runs short; the contract's checks do not need it here
MYPY_INI = "[mypy]\n[mypy-torch.*]\nfollow_imports = skip\nfollow_imports_for_stubs = True\n"
FIXED = "[from-dict-fixed-return]"


def gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "mypy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    (tmp_path / "mypy.ini").write_text(MYPY_INI, encoding="utf-8")
    shutil.copytree(
        engine_source_dir("merged"),
        tmp_path / "engine",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    runner = tmp_path / "engine" / "cpu_model_runner.py"
    text = runner.read_text(encoding="utf-8")
    # mypy's own errors, which the gate leaves alone
    text += '\nimport engine_dependency_not_installed  # noqa\n_probe: int = "not an int"\n'
    runner.write_text(text, encoding="utf-8")
    return tmp_path


def break_the_contract(root: Path) -> None:
    runner = root / "engine" / "cpu_model_runner.py"
    text = runner.read_text(encoding="utf-8")
    start = text.index("    def from_broadcasted_tensor_dict(")
    end = text.index(":\n", text.index(")", start)) + 2
    header = text[start:end]
    broken = re.sub(r"cls: Type\[\w+\]", "cls", header)
    broken = re.sub(r"-> [\w\"]+:", '-> "CPUModelInput":', broken)
    assert broken != header
    runner.write_text(text.replace(header, broken), encoding="utf-8")


def test_gate_fails_on_the_contract_only_and_on_new_errors_against_a_baseline(
    engine: Path,
) -> None:
    # mypy's own errors only: the gate passes and says what it left alone
    clean = gate(engine, "engine")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.splitlines() == [
        "runnercheck mypy: no contract errors; 2 other mypy errors not gating "
        "(import-not-found 1, assignment 1)"
    ]
    baseline = engine / "mypy-baseline.txt"
    wrote = gate(engine, "--baseline", str(baseline), "--write-baseline", "engine")
    assert wrote.returncode == 0, wrote.stderr
    assert gate(engine, "--baseline", str(baseline), "engine").returncode == 0

    break_the_contract(engine)
    broken = gate(engine, "engine")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    lines = broken.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("engine/cpu_model_runner.py:")
    assert lines[0].endswith(FIXED)
    assert lines[1].startswith("runnercheck mypy: 1 contract error in 1 file; 2 other")
    # against the baseline the new error fails the run, the old ones do not
    new = gate(engine, "--baseline", str(baseline), "engine")
    assert new.returncode == 1
    assert [line for line in new.stdout.splitlines() if ": error: " in line] == [lines[0]]


def test_gate_github_format_annotates_what_fails_and_warns_of_the_rest(engine: Path) -> None:
    """``--format github``: one workflow command per error, following the syntax the
    Actions runner reads (the same pattern as ``check --format github``'s test)."""
    from tests.check.test_editor_formats import COMMAND

    break_the_contract(engine)
    failing = gate(engine, "--format", "github", "engine")
    assert failing.returncode == 1, failing.stdout + failing.stderr
    *annotations, summary = failing.stdout.splitlines()
    assert len(annotations) == 1 and COMMAND.fullmatch(annotations[0]), annotations
    assert annotations[0].startswith("::error file=engine/cpu_model_runner.py,line=")
    assert ",title=mypy [from-dict-fixed-return]::" in annotations[0]
    assert summary.startswith("runnercheck mypy: 1 contract error in 1 file; 2 other")
    every = gate(engine, "--format", "github", "--all", "engine")
    levels = [line.split(" ", 1)[0] for line in every.stdout.splitlines()[:-1]]
    assert sorted(levels) == ["::error", "::warning", "::warning"], every.stdout
    assert all(COMMAND.fullmatch(line) for line in every.stdout.splitlines()[:-1])


def test_gate_adds_the_plugin_without_any_mypy_configuration(engine: Path) -> None:
    """mypy loads configured plugins only from a configuration file: with none at all the
    gate still runs the plugin (on a tree like a bare copy of an engine)."""
    (engine / "mypy.ini").unlink()
    break_the_contract(engine)
    proc = gate(engine, "--follow-imports=skip", "engine")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].endswith(FIXED), proc.stdout


def test_gate_usage_errors_exit_2(tmp_path: Path) -> None:
    missing = gate(tmp_path, "--baseline", str(tmp_path / "none.txt"), "x.py")
    assert missing.returncode == 2
    assert "none.txt: no such baseline (make it with `runnercheck mypy --baseline" in (
        missing.stderr
    )
    (tmp_path / "bad.txt").write_text("just one field\n", encoding="utf-8")
    bad = gate(tmp_path, "--baseline", str(tmp_path / "bad.txt"), "x.py")
    assert bad.returncode == 2 and "bad.txt:1: not a baseline line" in bad.stderr
    assert gate(tmp_path, "--write-baseline", "x.py").returncode == 2


@pytest.mark.vllm
@pytest.mark.slow
def test_gate_on_the_vllm_063_worker_fails_on_the_contract_errors_alone(tmp_path: Path) -> None:
    """mypy reports hundreds of errors of vLLM's own there; the gate prints and fails on
    exactly the plugin's (pinned in expected/, as tests/mypy_plugin/test_vllm.py reads
    them). benchmarks/mypy_gate.py measures 0.5.0 and 0.6.3, worker and whole tree."""
    from tests.mypy_plugin.mypy_run import expected, normalise
    from tests.vllm_wheels import vllm_package

    package = vllm_package("0.6.3")
    (tmp_path / "mypy.ini").write_text("[mypy]\nplugins = mypy_plugin\n", encoding="utf-8")
    flags = ("--no-site-packages", "--ignore-missing-imports", "--follow-imports=silent")
    proc = gate(tmp_path, *flags, str(package / "worker"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    *errors, last = normalise(proc.stdout, package.parent).splitlines()
    assert errors == expected("vllm-0.6.3-worker.txt").splitlines()
    found = re.match(r"runnercheck mypy: (\d+) contract errors in \d+ files; (\d+) other", last)
    assert found and int(found[1]) == len(errors) and int(found[2]) > 100, last
