"""The GPU check's own logic, on any machine: what it installs and from where, how it
reads pytest's JUnit XML, its verdict, and a GPU-mode run where there is no GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import gpu_check
from benchmarks.gpu_requirements import (
    missing,
    needed,
    read_list,
    requirement_name,
    unsatisfied,
)

REPO = Path(__file__).resolve().parents[1]


def names(requirements: list[str]) -> set[str]:
    return {requirement_name(r) for r in requirements}


def test_needed_leaves_out_the_static_tools() -> None:
    default = names(needed())
    assert {"pydantic", "torch", "numpy", "hypothesis", "rich", "pytest"} <= default
    assert not default & {"mypy", "libcst"}
    assert {"mypy", "libcst"} <= names(needed(static=True))


def test_needed_reads_a_fuzz_extra(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        "[project]\nname = 'x'\ndependencies = ['pydantic>=2', 'mypy>=1']\n"
        "[project.optional-dependencies]\nfuzz = ['torch>=2.2', 'Hypothesis>=6']\n"
        "dev = ['pytest>=8', 'ruff']\n"
    )
    assert needed(pyproject) == ["pydantic>=2", "torch>=2.2", "Hypothesis>=6", "pytest>=8"]


def test_missing_against_the_gpu_machine_list() -> None:
    present = read_list(REPO / "scripts" / "gpu_machine_packages.txt")
    assert {"torch", "numpy", "hypothesis", "pytest", "rich", "typing-extensions"} <= present
    assert not present & {"pydantic", "libcst", "mypy"}
    assert names(missing(needed(), present)) == {"pydantic"}
    assert names(missing(needed(static=True), present)) == {"pydantic", "mypy", "libcst"}


def test_offline_install_reaches_only_the_wheelhouse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/elsewhere")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "https://example.invalid/simple")
    env = gpu_check.pip_env()
    assert not {k for k in env if k.startswith("PIP_")} - {
        "PIP_CONFIG_FILE",
        "PIP_DISABLE_PIP_VERSION_CHECK",
    }
    assert env["PIP_CONFIG_FILE"] == os.devnull
    command = gpu_check.install_command("py", Path("/site"), Path("/wheels"), ["pydantic>=2"])
    assert command[command.index("--find-links") + 1] == "/wheels"
    assert command[command.index("--target") + 1] == "/site"
    assert "--no-index" in command and command[-1] == "pydantic>=2"
    assert "--no-index" not in gpu_check.install_command("py", Path("/site"), None, [])


def test_unsatisfied_names_what_is_absent_or_too_old() -> None:
    assert unsatisfied(needed()) == []  # this environment has everything
    wanted = ["torch>=999", "numpy>=1.0", "surely-not-installed-dist>=1"]
    assert unsatisfied(wanted) == ["torch>=999", "surely-not-installed-dist>=1"]


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="3">
<testcase classname="tests.gpu.test_a" name="test_ok" time="1.5">
  <properties><property name="gpu" value="NVIDIA H200"/></properties></testcase>
<testcase classname="tests.gpu.test_a" name="test_bad" time="0.1">
  <failure message="assert 1 == 2&#10;more">trace</failure></testcase>
<testcase classname="tests.gpu.test_b" name="test_cuda" time="0">
  <skipped type="pytest.skip" message="no CUDA device: this test runs CUDA tensors">x</skipped>
</testcase></testsuite></testsuites>
"""


def test_parse_junit(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    parsed = gpu_check.parse_junit(path)
    assert (parsed["passed"], parsed["failed"], parsed["skipped"], parsed["errors"]) == (1, 1, 1, 0)
    ok, bad, skipped = parsed["cases"]
    assert ok == {
        "test": "tests.gpu.test_a::test_ok",
        "outcome": "passed",
        "seconds": 1.5,
        "properties": {"gpu": "NVIDIA H200"},
    }
    assert bad["message"] == "assert 1 == 2"
    assert skipped["message"].startswith("no CUDA device")
    assert "error" in gpu_check.parse_junit(tmp_path / "absent.xml")


def summary(cases: list[dict[str, Any]], cuda: bool = True) -> dict[str, Any]:
    outcomes = [c["outcome"] for c in cases]
    tests = {k: outcomes.count(k) for k in ("passed", "failed", "errors", "skipped")}
    bench = {
        "step_dict": {"decode": {"two_over_one": {"median": 1.2, "min": 1.1, "max": 1.3}}},
        "round_trips": [{"device": "cuda", "world_size": 2, "round_trips_per_s": {"median": 99}}],
    }
    parts = {name: {"status": "ok"} for name in ("install", "environment", "tests", "benchmark")}
    parts["sweep"] = {"status": "failed (exit 1)", "exit_code": 1}  # the leak it finds
    return {
        "parts": parts,
        "tests": {**tests, "cases": cases},
        "sweep": {"outcomes": dict(gpu_check.EXPECTED_SWEEP)},
        "benchmark": bench,
        "environment": {"cuda_available": cuda},
        "install": {"installed": ["pydantic-2"]},
    }


PASSED = {"test": "t::a", "outcome": "passed"}
NO_GPU = {"test": "t::b", "outcome": "skipped", "message": "no CUDA device: needs one"}
TWO_GPUS = {"test": "t::c", "outcome": "skipped", "message": "NCCL needs 2 CUDA devices"}


def test_verdict_on_a_gpu() -> None:
    ok, line = gpu_check.verdict(summary([PASSED, TWO_GPUS]), rehearse=False)
    assert ok, line
    assert line.startswith("GPU CHECK PASS: 1 tests passed, 1 skipped (NCCL needs 2 CUDA")
    assert "two broadcasts/one merged 1.20x (1.10-1.30, decode step)" in line
    assert "fuzz 99 round trips/s (cuda, world size 2)" in line
    ok, line = gpu_check.verdict(summary([PASSED, NO_GPU]), rehearse=False)
    assert not ok and "1 tests skipped for want of a GPU" in line
    failed = summary([PASSED, {"test": "t::d", "outcome": "failed"}])
    failed["parts"]["benchmark"]["status"] = "timed out after 150 s"
    ok, line = gpu_check.verdict(failed, rehearse=False)
    assert line == ("GPU CHECK FAIL: benchmark: timed out after 150 s; 1 tests failed (t::d)")
    ok, line = gpu_check.verdict(summary([PASSED], cuda=False), rehearse=False)
    assert not ok and "torch sees no CUDA device" in line


def test_the_sweep_must_end_as_expected() -> None:
    ok, line = gpu_check.verdict(summary([PASSED]), rehearse=False)
    assert ok and "directory sweep on CUDA: 4 targets as expected" in line
    ok, line = gpu_check.verdict(summary([NO_GPU], cuda=False), rehearse=True)
    assert ok and "directory sweep on the CPU: 4 targets as expected" in line
    step = next(t for t in gpu_check.EXPECTED_SWEEP if "+" in t)
    missed = summary([PASSED])
    missed["sweep"]["outcomes"][step] = "PASS"
    ok, line = gpu_check.verdict(missed, rehearse=False)
    assert not ok and f"sweep: {step}: PASS (expected FAIL RC302 virtual_engine)" in line
    crashed = summary([PASSED])
    crashed["parts"]["sweep"] = {"status": "timed out after 90 s", "exit_code": None}
    crashed["sweep"] = {"error": "gpu_sweep.json: JSONDecodeError: Expecting value"}
    ok, line = gpu_check.verdict(crashed, rehearse=False)
    assert not ok and "sweep: timed out after 90 s" in line and "JSONDecodeError" in line


def test_the_sweep_outcomes_of_a_fuzz_report() -> None:
    report = {
        "results": [
            {"target": "m:A", "status": "PASS", "problems": []},
            {
                "target": "m:A+m:B",
                "status": "FAIL",
                "problems": [{"code": "RC302", "field": "x"}, {"code": "RC301", "field": "y"}],
            },
            {"target": "m:C", "status": "ERROR", "problems": []},
        ]
    }
    assert gpu_check.sweep_outcomes(report) == {
        "m:A": "PASS",
        "m:A+m:B": "FAIL RC301 y RC302 x",
        "m:C": "ERROR",
    }


def test_verdict_of_a_rehearsal() -> None:
    ok, line = gpu_check.verdict(summary([NO_GPU, TWO_GPUS], cuda=False), rehearse=True)
    assert ok, line
    assert line.startswith(
        "GPU CHECK REHEARSAL PASS: offline install of 1 distributions, "
        "2 GPU tests collected and skipped (no GPU)"
    )
    ok, line = gpu_check.verdict(summary([NO_GPU, PASSED], cuda=False), rehearse=True)
    assert not ok and "another reason than no GPU" in line


def test_out_dir_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUT", "/from-env")
    assert gpu_check.out_dir(Path("/given")) == Path("/given")
    assert gpu_check.out_dir(None) == Path("/from-env")
    monkeypatch.delenv("OUT")
    assert gpu_check.out_dir(None) == Path("gpu-check-out")


def test_bad_argument_is_one_line() -> None:
    proc = subprocess.run(
        ["bash", "benchmarks/gpu_check.sh", "--bogus"], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr == "gpu_check.sh: unknown argument --bogus (see --help)\n"


@pytest.mark.slow
def test_gpu_mode_without_a_gpu_fails_early_and_says_why(tmp_path: Path) -> None:
    """Everything the check needs is installed here, so pip reaches no index."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("OUT", None)
    command = [sys.executable, "benchmarks/gpu_check.py", "--out", str(tmp_path / "out")]
    proc = subprocess.run(
        [*command, "--wheelhouse", str(tmp_path / "none")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("GPU CHECK FAIL: torch sees no CUDA device")
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert report["mode"] == "gpu" and report["verdict"] in last
    assert set(report["parts"]) == {"install", "environment"}
    assert report["parts"]["install"]["status"] == "ok"
    assert report["install"]["offline"] is False
    assert report["install"]["lacking"] == report["install"]["installed"] == []
    assert report["environment"]["cuda_available"] is False
    log = (tmp_path / "out" / "gpu_check.log").read_text()
    assert "tests and benchmark not run: torch sees no CUDA device" in log


def test_an_interpreter_without_torch_is_named(tmp_path: Path) -> None:
    """The check never installs torch: it stops and says which interpreter to use."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True)
    python = tmp_path / "v" / "bin" / "python"
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(python), "benchmarks/gpu_check.py", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "run with PYTHON=<the python with CUDA torch>" in proc.stdout
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["verdict"].startswith(f"GPU CHECK FAIL: {python} lacks torch>=2.2")
    assert report["parts"] == {}
