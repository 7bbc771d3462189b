"""``runnercheck fuzz`` imports and runs where libcst, mypy and pydantic are missing
(as on a GPU machine that has only torch, numpy, hypothesis, pytest and rich).

A ``sitecustomize`` on ``PYTHONPATH`` puts a finder in front of ``sys.meta_path`` in
every process of the run (the CLI, the forkserver and the ranks) that refuses those
packages and logs each attempt. pydantic validates a ``[tool.runnercheck]`` table and
is imported only when the target project has one; this project has none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("libcst", "mypy", "pydantic")

SITECUSTOMIZE = """
import os
import sys

BLOCKED = {blocked!r}


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            with open(os.environ["RC_BLOCKED_LOG"], "a") as log:
                log.write(f"{{os.getpid()}} {{name}}\\n")
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None


sys.meta_path.insert(0, _Refuse())
"""


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(blocked=BLOCKED))
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), str(REPO)]),
        RC_BLOCKED_LOG=str(tmp_path / "blocked.log"),
    )
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=240
    )


def test_the_blocker_blocks(tmp_path: Path) -> None:
    proc = run(tmp_path, "-c", "import mypy.api")
    assert proc.returncode == 1
    assert "No module named 'mypy' (blocked)" in proc.stderr
    proc = run(tmp_path, "-m", "runnercheck", "migrate", "--check", "runnercheck/demo/engine")
    assert proc.returncode != 0 and "(blocked)" in proc.stderr


def test_fuzz_runs_without_libcst_mypy_and_pydantic(tmp_path: Path) -> None:
    proc = run(
        tmp_path,
        "-m",
        "runnercheck",
        "fuzz",
        "runnercheck/demo/engine/merged",
        "--attn-backend",
        "runnercheck.demo.engine.attention:TinyAttentionBackend",
        "--world-size",
        "2",
        "--examples",
        "10",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    # its five input classes, and the worker input merged with each runner's model input
    # (the three composed steps the analysis finds there)
    assert report["passed"] and len(report["results"]) == 8
    assert sum("+" in r["target"] for r in report["results"]) == 3
    log = tmp_path / "blocked.log"
    attempts = log.read_text().splitlines() if log.exists() else []
    assert attempts == [], "the fuzz run tried to import: " + ", ".join(attempts)
