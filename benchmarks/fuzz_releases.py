"""``runnercheck fuzz vllm/worker/`` on real vLLM releases: every input class, one command.

For each release, the wheel's sources are unpacked once (``tests/vllm_wheels.py``) and
``runnercheck fuzz vllm/worker/ --stub-imports '*' --format json`` runs in that tree
with nothing else configured. The table lists each class and each composed step (the
worker input and a runner's model input in one dict): PASS, FAIL with the fields
found (and, where it has been judged, whether the finding is true, with the code that
proves it, or false), or ERROR (cannot run, with why); then the wall time of each
release's command.

Usage::

    python benchmarks/fuzz_releases.py [--versions 0.5.1 0.6.3 0.8.0 0.9.2] [--seed 1]
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

VERSIONS = ("0.5.1", "0.6.3", "0.8.0", "0.9.2")

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


def _false(version: str, target: str, fields: tuple[str, ...], why: str) -> None:
    for name in fields:
        VERDICTS[(version, f"vllm.worker.{target}", name)] = f"false: {why}"


_false(
    "0.8.0",
    "hpu_model_runner:ModelInputForHPUWithSamplingMetadata",
    ("real_batch_size", "batch_size_padded"),
    "execute_model reads them into locals at hpu_model_runner.py:1988-1989, and uses them "
    "only after `if not self.is_driver_worker: return []` (:2051, :2067) and under "
    "`self.is_driver_worker and self.profiler.enabled` (:2069-2079)",
)


def _step(model_input: str) -> str:
    """A composed step's target: the worker input, then ``model_input``."""
    return f"worker_base:WorkerInput+vllm.worker.{model_input}"


def _in_step(model_input: str, fields: tuple[str, ...]) -> tuple[str, ...]:
    """The fields of ``model_input`` as a composed step names them."""
    label = model_input.partition(":")[2]
    return tuple(f"{label}.{name}" for name in fields)


# the composed steps lose what their model input loses alone
for _version, _target in [
    ("0.6.3", "xpu_model_runner:ModelInputForXPUWithSamplingMetadata"),
    ("0.6.3", "cpu_model_runner:ModelInputForCPUWithSamplingMetadata"),
    ("0.6.3", "cpu_enc_dec_model_runner:EncoderDecoderModelInputForCPU"),
    ("0.8.0", "cpu_model_runner:ModelInputForCPUWithSamplingMetadata"),
    ("0.8.0", "xpu_model_runner:ModelInputForXPUWithSamplingMetadata"),
    ("0.8.0", "pooling_model_runner:ModelInputForGPUWithPoolingMetadata"),
]:
    for (_v, _t, _field), _verdict in list(VERDICTS.items()):
        if _v == _version and _t == f"vllm.worker.{_target}":
            VERDICTS[(_version, f"vllm.worker.{_step(_target)}", *_in_step(_target, (_field,)))] = (
                _verdict
            )

_VE = ("virtual_engine",)
_true(
    "0.5.1",
    _step("cpu_model_runner:CPUModelInput"),
    _VE,
    "WorkerInput.from_broadcasted_tensor_dict reads it without popping it "
    "(worker_base.py:144), CPUModelInput(**tensor_dict) has no such field "
    "(cpu_model_runner.py:68): a TypeError on every other rank (execute_model, "
    "worker_base.py:254-258)",
)
_true(
    "0.5.1",
    _step("xpu_model_runner:ModelInputForXPU"),
    _VE,
    "WorkerInput.from_broadcasted_tensor_dict reads it without popping it "
    "(worker_base.py:144), ModelInputForXPU(**tensor_dict) has no such field "
    "(xpu_model_runner.py:75): a TypeError on every other rank",
)
_true(
    "0.9.2",
    "cpu_model_runner:ModelInputForCPUWithSamplingMetadata",
    ("lora_requests", "lora_mapping"),
    "cpu_model_runner.py:96-106 re-lists the keys without it, execute_model reads it at :622-625",
)
_true(
    "0.9.2",
    _step("cpu_model_runner:ModelInputForCPUWithSamplingMetadata"),
    _in_step("cpu_model_runner:ModelInputForCPUWithSamplingMetadata", ("lora_requests",)),
    "cpu_model_runner.py:96-106 re-lists the keys without it, execute_model reads it at :622-625",
)
for _target, _line in (
    ("xpu_model_runner:ModelInputForXPU", 62),
    ("xpu_model_runner:ModelInputForXPUWithSamplingMetadata", 90),
):
    _proof = (
        f"xpu_model_runner.py:{_line} leaves it out of the dict, execute_model reads it at :567"
    )
    _true("0.9.2", _target, _MM, _proof)
    _true("0.9.2", _step(_target), _in_step(_target, _MM), _proof)
_TT = ("token_types",)
_TT_PROOF = (
    "model_runner.py:108 leaves it out of the dict (the pooling input inherits it), "
    "PoolingModelRunner.execute_model reads it at pooling_model_runner.py:114-115"
)
_true("0.9.2", "model_runner:ModelInputForGPU", _TT, _TT_PROOF)
_true("0.9.2", "pooling_model_runner:ModelInputForGPUWithPoolingMetadata", _TT, _TT_PROOF)
_true(
    "0.9.2",
    _step("pooling_model_runner:ModelInputForGPUWithPoolingMetadata"),
    _in_step("pooling_model_runner:ModelInputForGPUWithPoolingMetadata", _TT),
    _TT_PROOF,
)
_HPU = "hpu_model_runner:ModelInputForHPUWithSamplingMetadata"
_HPU_SIZES = ("real_batch_size", "batch_size_padded")
_HPU_SIZES_WHY = (
    "execute_model reads them into locals at hpu_model_runner.py:2003-2004 and uses them "
    "only under `self.is_driver_worker and self.profiler.enabled` (:2189-2198)"
)
_HPU_FLAGS = ("is_first_multi_step", "is_last_step")
_HPU_FLAGS_WHY = (
    "multi_step_hpu_worker.py:66-77 sends the whole dict only on a first step, where the "
    "defaults hold, and the two flags in a dict of their own on the others, which the "
    "other ranks apply with dataclasses.replace (:108-113); is_last_step is read only "
    "when is_first_multi_step is false (hpu_model_runner.py:1970-1971)"
)
for _target in (_HPU, _step(_HPU)):
    _named = (lambda f: f) if _target == _HPU else (lambda f: _in_step(_HPU, f))
    _false("0.9.2", _target, _named(_HPU_SIZES), _HPU_SIZES_WHY)
    _false("0.9.2", _target, _named(_HPU_FLAGS), _HPU_FLAGS_WHY)
_false(
    "0.8.0",
    _step("hpu_model_runner:ModelInputForHPUWithSamplingMetadata"),
    _in_step("hpu_model_runner:ModelInputForHPUWithSamplingMetadata", _HPU_SIZES),
    "as the model input alone (above)",
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


def rows(run: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(release, target, status, what was found, kind): the kind is PASS, true (every
    finding of the row judged true), false (one judged false), not judged, or cannot
    run."""
    version = run["version"]
    if "report" not in run:
        return [(version, "(the command)", "ERROR", run["error"], "cannot run")]
    out = []
    for result in run["report"]["results"]:
        name = result["target"]
        if result["status"] == "ERROR":
            out.append((version, name, "ERROR", result["error"], "cannot run"))
            continue
        if result["status"] == "PASS":
            out.append((version, name, "PASS", "", "PASS"))
            continue
        found = []
        verdicts = []
        for problem in result["problems"]:
            field = problem["field"]
            verdict = VERDICTS.get((version, name, field), "not judged")
            verdicts.append(verdict.partition(":")[0])
            found.append(f"{problem['code']} {field} [{verdict}]")
        kind = (
            "false"
            if "false" in verdicts
            else "true"
            if verdicts and all(v == "true" for v in verdicts)
            else "not judged"
        )
        out.append((version, name, "FAIL", "; ".join(found), kind))
    return out


KINDS = ("PASS", "true", "false", "not judged", "cannot run")


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
        kinds = [row[4] for row in rows(run)]
        shown = ", ".join(f"{kinds.count(kind)} {kind}" for kind in KINDS)
        print(
            f"vLLM {run['version']}: {len(kinds)} rows: {shown}; "
            f"{run['seconds']:.1f} s (exit {run['exit']})"
        )
    kinds = [row[4] for row in table]
    print(f"all: {len(kinds)} rows: " + ", ".join(f"{kinds.count(k)} {k}" for k in KINDS))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
