"""``runnercheck mypy`` (the CI gate) on real vLLM releases, against mypy with the plugin.

For each release (default 0.5.0 and 0.6.3, downloaded and cached by
tests/vllm_wheels.py) and each target (``vllm/worker/`` and the whole ``vllm/``),
in a copy with ``plugins = mypy_plugin`` in its mypy.ini:

* ``mypy TARGET`` as the README documents it: its exit status and error count (the
  baseline: what a CI job that runs mypy as is would see);
* ``runnercheck mypy TARGET``: the gate's exit status, the contract errors it fails on,
  and the errors it leaves alone, by code;
* ``runnercheck mypy --baseline`` after ``--write-baseline``: exit 0 on the same tree,
  then exit 1 with exactly one new error once one is added.

Each mypy run starts from a cold cache of its own; times are the child process's CPU
seconds (user + system; on a shared machine wall time mostly measures the neighbours),
with wall seconds beside them.

    python benchmarks/mypy_gate.py                      # 0.5.0 and 0.6.3, both targets
    python benchmarks/mypy_gate.py --versions 0.6.3 --targets vllm/worker/
    python benchmarks/mypy_gate.py --versions 0.5.0 --counts-only   # mypy as is only

The error counts depend on the environment mypy runs in, which is this script's
interpreter: with torch (and numpy) installed beside mypy, as ``scripts/setup.sh`` sets
up, more of vLLM's types resolve and mypy reports more errors than in an environment
with runnercheck's static tools alone (``pip install .``, no torch). Each row names
torch's version in that environment, or null. For the static tools' figures, run this
script with such an environment's Python (``/path/to/venv/bin/python
benchmarks/mypy_gate.py ...``).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.vllm_wheels import vllm_source  # noqa: E402

SUMMARY = re.compile(r"Found (\d+) errors? in (\d+) files?")


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(CPU seconds of the child, the process); wall seconds are in WALL[-1]."""
    cpu, start = child_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600)
    WALL.append(time.perf_counter() - start)
    return child_cpu() - cpu, proc


WALL: list[float] = []


def fresh(work: Path) -> None:
    shutil.rmtree(work / ".mypy_cache", ignore_errors=True)


def plain_mypy(work: Path, target: str) -> tuple[float, dict[str, object]]:
    """mypy as is on ``target``, from a cold cache: its CPU seconds, and its exit status,
    errors, files and times as a row."""
    fresh(work)
    cpu, plain = timed([sys.executable, "-m", "mypy", target], work)
    found = SUMMARY.search(plain.stdout)
    return cpu, {
        "mypy_exit": plain.returncode,
        "mypy_errors": int(found.group(1)) if found else 0,
        "mypy_files": int(found.group(2)) if found else 0,
        "mypy_cpu_s": round(cpu, 1),
        "mypy_wall_s": round(WALL[-1], 1),
    }


def torch_version() -> str | None:
    """torch's version in this interpreter's environment, without importing it."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def measure(
    version: str, target: str, root: Path, *, counts_only: bool = False
) -> dict[str, object]:
    work = root / version
    if not work.exists():
        shutil.copytree(vllm_source(version) / "vllm", work / "vllm")
        (work / "mypy.ini").write_text("[mypy]\nplugins = mypy_plugin\n", encoding="utf-8")
    plain_s, plain = plain_mypy(work, target)
    head = {"version": version, "target": target, "torch": torch_version(), **plain}
    if counts_only:
        return head
    py = sys.executable
    fresh(work)
    gate_s, gate = timed([py, "-m", "runnercheck", "mypy", "--all", target], work)
    gate_wall = WALL[-1]
    last = gate.stdout.strip().splitlines()[-1] if gate.stdout.strip() else gate.stderr
    baseline = work / "mypy-baseline.txt"
    wrote = subprocess.run(
        [py, "-m", "runnercheck", "mypy", "--baseline", str(baseline), "--write-baseline", target],
        cwd=work, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    same_s, same = timed(
        [py, "-m", "runnercheck", "mypy", "--baseline", str(baseline), target], work
    )
    worker = work / "vllm" / "worker" / "worker.py"
    original = worker.read_text(encoding="utf-8")
    worker.write_text(original + '\n_gate_probe: int = "new"\n', encoding="utf-8")
    try:
        _s, new = timed(
            [py, "-m", "runnercheck", "mypy", "--baseline", str(baseline), target], work
        )
    finally:
        worker.write_text(original, encoding="utf-8")
    new_lines = [line for line in new.stdout.splitlines() if ": error: " in line]
    return {
        **head,
        "gate_exit": gate.returncode,
        "gate_summary": last,
        "gate_cpu_s": round(gate_s, 1),
        "gate_wall_s": round(gate_wall, 1),
        "gate_over_mypy_cpu": round(gate_s / plain_s, 2),
        "baseline_write_exit": wrote.returncode,
        "baseline_same_tree_exit": same.returncode,
        "baseline_same_tree_cpu_s": round(same_s, 1),
        "baseline_one_new_error_exit": new.returncode,
        "baseline_new_errors_printed": new_lines,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="+", default=["0.5.0", "0.6.3"])
    parser.add_argument("--targets", nargs="+", default=["vllm/worker/", "vllm/"])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--counts-only", action="store_true", help="run mypy as is only, not the gate"
    )
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-mypy-gate-") as tmp:
        for version in args.versions:
            for target in args.targets:
                row = measure(version, target, Path(tmp), counts_only=args.counts_only)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
