"""``runnercheck fuzz vllm/worker/`` on real vLLM releases: every input class, one command.

For each release, the wheel's sources are unpacked once (``tests/vllm_wheels.py``) and
``runnercheck fuzz vllm/worker/ --stub-imports '*' --format json`` runs in that tree
with nothing else configured. The table lists each class: PASS, FAIL with the fields
found (and, where it has been judged, whether the finding is true, with the code that
proves it, or false), or ERROR (cannot run, with why); then the wall time of each
release's command.

Usage::

    python benchmarks/fuzz_releases.py [--versions 0.5.1 0.6.3 0.8.0] [--seed 1]
                                       [--examples N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.vllm_wheels import vllm_source  # noqa: E402

VERSIONS = ("0.5.1", "0.6.3", "0.8.0")

#: Findings judged against the release's code: (release, class, field) -> verdict.
#: "true: ..." names the lines that prove it; "false: ..." says why it is not a bug.
VERDICTS: dict[tuple[str, str, str], str] = {}


def _true(version: str, target: str, fields: tuple[str, ...], proof: str) -> None:
    for name in fields:
        VERDICTS[(version, f"vllm.worker.{target}", name)] = f"true: {proof}"


_MM = ("multi_modal_kwargs",)
_true(
    "0.5.1",
    "xpu_model_runner:ModelInputForXPU",
    _MM,
    "xpu_model_runner.py:54-63 leaves it out of the dict, execute_model reads it at :386",
)
_true(
    "0.6.3",
    "xpu_model_runner:ModelInputForXPU",
    _MM,
    "xpu_model_runner.py:62 leaves it out of the dict, execute_model reads it at :568",
)
_true(
    "0.6.3",
    "xpu_model_runner:ModelInputForXPUWithSamplingMetadata",
    _MM,
    "xpu_model_runner.py:90 leaves it out of the dict, execute_model reads it at :568",
)
_true(
    "0.6.3",
    "cpu_model_runner:ModelInputForCPUWithSamplingMetadata",
    _MM,
    "cpu_model_runner.py:81 re-lists the keys without it, execute_model reads it at :528",
)
_true(
    "0.6.3",
    "cpu_enc_dec_model_runner:EncoderDecoderModelInputForCPU",
    _MM,
    "cpu_enc_dec_model_runner.py:30 re-lists the keys without it, execute_model reads it at :290",
)
_true(
    "0.8.0",
    "cpu_model_runner:ModelInputForCPUWithSamplingMetadata",
    ("lora_requests", "lora_mapping"),
    "cpu_model_runner.py:95 re-lists the keys without it, execute_model reads it at :636-639",
)
_true(
    "0.8.0",
    "xpu_model_runner:ModelInputForXPU",
    _MM,
    "xpu_model_runner.py:61 leaves it out of the dict, execute_model reads it at :576",
)
_true(
    "0.8.0",
    "xpu_model_runner:ModelInputForXPUWithSamplingMetadata",
    _MM,
    "xpu_model_runner.py:89 leaves it out of the dict, execute_model reads it at :576",
)
_true(
    "0.8.0",
    "hpu_model_runner:ModelInputForHPUWithSamplingMetadata",
    ("real_batch_size", "batch_size_padded"),
    "hpu_model_runner.py:560-572 re-lists the keys without it, execute_model reads it at "
    ":1988-1989",
)
_true(
    "0.8.0",
    "model_runner:ModelInputForGPU",
    ("token_types",),
    "model_runner.py:104 leaves it out of the dict (the pooling input inherits it), "
    "PoolingModelRunner.execute_model reads it at pooling_model_runner.py:106-107",
)
_true(
    "0.8.0",
    "pooling_model_runner:ModelInputForGPUWithPoolingMetadata",
    ("token_types",),
    "model_runner.py:104 leaves it out of the dict it inherits, execute_model reads it at "
    "pooling_model_runner.py:106-107",
)


def run_release(version: str, seed: int, examples: int | None) -> dict[str, Any]:
    tree = vllm_source(version)
    command = [
        sys.executable,
        "-m",
        "runnercheck",
        "fuzz",
        "vllm/worker/",
        "--stub-imports",
        "*",
        "--format",
        "json",
        "--seed",
        str(seed),
    ]
    if examples is not None:
        command += ["--examples", str(examples)]
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    seconds = time.perf_counter() - start
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
        return {"version": version, "seconds": seconds, "exit": done.returncode, "error": tail}
    return {"version": version, "seconds": seconds, "exit": done.returncode, "report": report}


def rows(run: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    version = run["version"]
    if "report" not in run:
        return [(version, "(the command)", "ERROR", run["error"])]
    out = []
    for result in run["report"]["results"]:
        name = result["target"]
        if result["status"] == "ERROR":
            out.append((version, name, "ERROR", result["error"]))
            continue
        if result["status"] == "PASS":
            out.append((version, name, "PASS", ""))
            continue
        found = []
        for problem in result["problems"]:
            field = problem["field"]
            verdict = VERDICTS.get((version, name, field), "not judged")
            found.append(f"{problem['code']} {field} [{verdict}]")
        out.append((version, name, "FAIL", "; ".join(found)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", nargs="+", default=list(VERSIONS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--examples", type=int, default=None, help="(default: fuzz's own)")
    parser.add_argument("--json", type=Path, help="also write the runs to this file")
    args = parser.parse_args()
    runs = [run_release(v, args.seed, args.examples) for v in args.versions]
    table = [row for run in runs for row in rows(run)]
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    for row in table:
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])), row[3])
    print()
    for run in runs:
        counts: dict[str, int] = {}
        for row in rows(run):
            counts[row[2]] = counts.get(row[2], 0) + 1
        shown = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        print(f"vLLM {run['version']}: {shown}; {run['seconds']:.1f} s (exit {run['exit']})")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
