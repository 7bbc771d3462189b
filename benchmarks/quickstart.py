"""The README's quick start, replayed on a copy of a vLLM release's ``vllm/`` (0.5.0 by
default, the last with two broadcasts per step): every step's command, exit status,
wall time and last line, as a table, then whether the documented CI workflow
(docs/examples/github-actions.yml's gates: ``runnercheck mypy`` and ``runnercheck
check``, with ``check --baseline`` for the bugs a tree keeps on purpose) is green on
the migrated tree.

    python benchmarks/quickstart.py                 # vLLM 0.5.0
    python benchmarks/quickstart.py --version 0.5.1
    python benchmarks/quickstart.py --verbose       # each step's whole output too

The commands run with this checkout's environment (``python -m runnercheck``), in a
git repository holding the copy (so that pre-commit-style runs and ``git diff`` work
as in an engine's clone); the mypy steps use a ``mypy.ini`` that names the plugin and
nothing else, as the README's configuration does. Times are wall seconds on whatever
machine runs it; the header names the environment (Python, torch, the load average),
since mypy's error counts depend on whether torch is installed beside it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.vllm_wheels import vllm_source  # noqa: E402

MYPY_INI = "[mypy]\nplugins = mypy_plugin\n"


@dataclass
class Step:
    what: str
    args: list[str]
    expected: int
    #: git commands run in the tree first (not timed)
    git: tuple[tuple[str, ...], ...] = ()
    status: int = -1
    seconds: float = 0.0
    last: str = ""
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.status == self.expected


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=q", "-c", "user.email=q@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def run(step: Step, cwd: Path) -> Step:
    for args in step.git:
        git(cwd, *args)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "runnercheck", *step.args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    step.seconds = time.perf_counter() - started
    step.status = done.returncode
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    step.last = lines[-1][:110] if lines else ""
    step.output = done.stdout + done.stderr
    return step


def steps() -> list[Step]:
    return [
        Step("1. check", ["check", "vllm/"], 1),
        Step("2. the plugin, in CI", ["mypy", "vllm/worker/"], 0),
        Step("2. the plugin, whole tree", ["mypy", "vllm/"], 0),
        Step("3. migrate --check", ["migrate", "--check", "vllm/worker/"], 1),
        Step("3. migrate", ["migrate", "vllm/worker/"], 0),
        Step("3. check again", ["check", "vllm/"], 1),
        Step("3. migrate --check again", ["migrate", "--check", "vllm/"], 0),
        Step("3. the plugin again", ["mypy", "vllm/worker/"], 0),
        Step(
            "CI: record what stays",
            ["check", "--baseline", "runnercheck-baseline.txt", "--write-baseline", "vllm/"],
            0,
        ),
        Step("CI: check gate", ["check", "--baseline", "runnercheck-baseline.txt", "vllm/"], 0),
        Step("CI: mypy gate", ["mypy", "vllm/"], 0),
        # the pre-commit hook runs `migrate --check` on the staged files: the migrated
        # tree committed, then the release's worker/ files back, cpu_worker.py staged
        Step(
            "4. migrate hook, one file",
            ["migrate", "--check", "vllm/worker/cpu_worker.py"],
            1,
            git=(
                ("add", "-A"),
                ("commit", "-qm", "migrated"),
                ("checkout", "HEAD~1", "--", "vllm/worker/"),
            ),
        ),
    ]


def environment() -> str:
    """The Python, torch's version (or its absence) and the load average."""
    try:
        torch = f"torch {importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        torch = "no torch"
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"Python {platform.python_version()}, {torch}, {os.cpu_count()} cores, load {load}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.0")
    parser.add_argument(
        "--verbose", action="store_true", help="also print each step's whole output"
    )
    options = parser.parse_args()
    source = vllm_source(options.version) / "vllm"
    started = environment()
    with tempfile.TemporaryDirectory(prefix="runnercheck-quickstart-") as tmp:
        tree = Path(tmp) / "engine"
        shutil.copytree(source, tree / "vllm", ignore=shutil.ignore_patterns("__pycache__"))
        (tree / "mypy.ini").write_text(MYPY_INI, encoding="utf-8")
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "vllm"]):
            git(tree, *args)
        done = [run(step, tree) for step in steps()]
    print(f"vLLM {options.version}: the README's quick start, step by step")
    print(f"{started} at the start; load {os.getloadavg()[0]:.1f} at the end")
    print(f"{'step':27} {'exit':>4} {'want':>4} {'seconds':>8}  last line")
    for step in done:
        mark = "" if step.ok else "  <-- not as the README says"
        print(
            f"{step.what:27} {step.status:4} {step.expected:4} {step.seconds:8.1f}  {step.last}{mark}"
        )
    gates = [s for s in done if s.what.startswith("CI:")]
    green = all(s.ok for s in gates)
    print(f"CI on the migrated tree: {'green' if green else 'red'}")
    if options.verbose:
        for step in done:
            print(f"\n$ runnercheck {shlex.join(step.args)}    # {step.what}, exit {step.status}")
            print(step.output, end="")
    return 0 if all(step.ok for step in done) else 1


if __name__ == "__main__":
    raise SystemExit(main())
