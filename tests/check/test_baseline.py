"""``check --baseline FILE [--write-baseline]``: the findings recorded pass, any new one
fails, and a finding that moves with its code still matches."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from runnercheck import baseline

ROOT = Path(__file__).resolve().parents[2]
LEGACY = ROOT / "runnercheck" / "demo" / "engine" / "legacy"
RECURSIVE = """
from dataclasses import dataclass


@dataclass(frozen=True)
class PlantedInput:
    x: int = 0

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls.from_broadcasted_tensor_dict(tensor_dict)
"""


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "check", "--no-cache", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    return Path(shutil.copytree(LEGACY, tmp_path / "engine"))


def test_the_recorded_findings_pass_and_a_new_one_fails_alone(engine: Path) -> None:
    base = engine.parent / "baseline.txt"
    before = cli(engine.parent, "engine")
    assert before.returncode == 1 and "Found 3 findings" in before.stdout
    recorded = cli(engine.parent, "--baseline", str(base), "--write-baseline", "engine")
    assert recorded.returncode == 0 and "recorded 3 findings" in recorded.stdout
    assert len([line for line in base.read_text().splitlines() if "\t" in line]) == 3
    passed = cli(engine.parent, "--baseline", str(base), "engine")
    assert passed.returncode == 0, passed.stdout
    assert "3 in the baseline" in passed.stdout
    for name in ("worker.py", "model_runner.py"):  # every finding and line it cites moves
        path = engine / name
        path.write_text("\n\n\n" + path.read_text())
    moved = cli(engine.parent, "--baseline", str(base), "engine")
    assert moved.returncode == 0, moved.stdout
    (engine / "planted.py").write_text(RECURSIVE)
    planted = cli(engine.parent, "--baseline", str(base), "engine")
    assert planted.returncode == 1
    findings = [line for line in planted.stdout.splitlines() if ": RC" in line]
    assert len(findings) == 1 and findings[0].startswith("engine/planted.py:")


def test_each_line_covers_one_finding_and_line_numbers_do_not_count() -> None:
    one = baseline.key("w.py", "RC106", "pair (w.py:129, r.py:136) at line 4")
    assert one == baseline.key("w.py", "RC106", "pair (w.py:131, r.py:140) at line 9")
    assert one != baseline.key("w.py", "RC106", "pair (x.py:129, r.py:136) at line 4")
    assert baseline.new([one, one], Counter([one])) == [1]
    assert baseline.new([one], Counter([one, one])) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--write-baseline", "engine"], "--write-baseline needs --baseline FILE"),
        (["--baseline", "missing.txt", "engine"], "missing.txt: no such baseline"),
    ],
)
def test_baseline_usage_errors_are_one_line(engine: Path, args: list[str], message: str) -> None:
    done = cli(engine.parent, *args)
    assert done.returncode == 2 and message in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_file_that_is_not_a_baseline_names_its_line(engine: Path) -> None:
    base = engine.parent / "baseline.txt"
    base.write_text("# a comment\nnot a baseline line\n")
    done = cli(engine.parent, "--baseline", str(base), "engine")
    assert done.returncode == 2 and f"{base}:2: not a baseline line" in done.stderr


def test_a_baseline_line_with_an_old_code_matches_the_code_it_now_is(tmp_path: Path) -> None:
    base = tmp_path / "baseline.txt"
    base.write_text("pkg/worker.py\tMIG001\tdoes not parse: '(' was never closed\n")
    accepted = baseline.read(base, "runnercheck check")
    key = baseline.key("pkg/worker.py", "RC001", "does not parse: '(' was never closed")
    assert accepted == {key: 1}


@pytest.mark.vllm
@pytest.mark.slow
def test_vllm_0_6_3_recorded_passes_and_a_planted_bug_fails_alone(tmp_path: Path) -> None:
    """``docs/check.md``'s figures: on a copy of vLLM 0.6.3's ``vllm/``, 4 errors are
    recorded, the recorded tree passes, and a recursive ``from_broadcasted_tensor_dict``
    planted in ``ModelInputForCPU`` fails the run with that one RC101 finding."""
    from tests.check.test_vllm import source_root

    shutil.copytree(
        source_root("0.6.3") / "vllm",
        tmp_path / "vllm",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    recorded = cli(tmp_path, "--baseline", "rc-baseline.txt", "--write-baseline", "vllm/")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    lines = (tmp_path / "rc-baseline.txt").read_text().splitlines()
    assert len([line for line in lines if line and not line.startswith("#")]) == 4, lines
    again = cli(tmp_path, "--baseline", "rc-baseline.txt", "vllm/")
    assert again.returncode == 0 and "4 in the baseline" in again.stdout, again.stdout
    runner = tmp_path / "vllm" / "worker" / "cpu_model_runner.py"
    text = runner.read_text()
    legal = '    ) -> "ModelInputForCPU":\n        if attn_backend is not None:'
    assert text.count(legal) == 1
    planted = text.replace(
        "                attn_backend, tensor_dict)\n        return cls(**tensor_dict)",
        "                attn_backend, tensor_dict)\n"
        "        return cls.from_broadcasted_tensor_dict(tensor_dict)",
        1,
    )
    assert planted != text
    runner.write_text(planted)
    failed = cli(tmp_path, "--baseline", "rc-baseline.txt", "vllm/")
    assert failed.returncode == 1, failed.stdout
    found = [line for line in failed.stdout.splitlines() if " RC" in line]
    assert len(found) == 1 and " RC101 " in found[0] and "cpu_model_runner.py" in found[0], found
