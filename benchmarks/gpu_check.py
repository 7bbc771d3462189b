"""The GPU check in one run: install what is missing, run the GPU tests and the GPU
benchmark, write one JSON and a log, print one verdict line.

Runs with the interpreter that holds torch (on the GPU machine: the preinstalled
``python3`` and its CUDA torch) and the standard library alone; every part is a child
process of that interpreter with the working tree on ``PYTHONPATH``:

1. ``install``: of what :mod:`benchmarks.gpu_requirements` lists, whatever the
   interpreter does not meet is installed with its dependencies by ``pip install
   --target`` into a temporary folder put on ``PYTHONPATH``: the interpreter's own
   environment is never changed (not even an old version of a dependency uninstalled).
   From the wheelhouse alone when there is one (``--no-index``; pip's configuration and
   ``PIP_*`` variables are left out, so nothing else is reached), else from the index.
   torch is never installed: without a torch that meets the requirement the check
   stops and says which interpreter to use.
2. ``environment``: python, torch, CUDA, the GPU, NCCL.
3. ``tests``: pytest on the GPU tests (tests/gpu, tests/fuzz/test_cuda.py) and on
   tests/fuzz/test_without_static_tools.py; on a GPU machine with
   ``RUNNERCHECK_REQUIRE_CUDA=1`` (a missing GPU is an error, not a skip). A rehearsal
   selects the tests marked ``gpu`` alone (every file is still collected): they must
   all skip for want of CUDA; the CPU tests of those files run in the main suite.
4. ``sweep``: ``runnercheck fuzz`` on a directory and a file of fixtures (no network:
   nothing is downloaded), on CUDA (on the CPU in a rehearsal): every input class and
   the composed step the analysis finds there; each must end as expected (the classes
   and the input holding CUDA events PASS, the step's leaked key is found).
5. ``benchmark``: benchmarks/bench_gpu.py.

Each part has a hard timeout (its cap, and never past the whole run's budget); a part
that fails or times out does not stop the next one. ``--rehearse``: the same on a
machine without a GPU (CUDA tests skip and must say so; the benchmark runs ``--quick``
on the CPU); benchmarks/gpu_check.sh makes the environment for it.

The JSON (``gpu_check.json``), the log (``gpu_check.log``), pytest's JUnit XML
(``gpu_tests.xml``) and the sweep's report (``gpu_sweep.json``) go to ``--out DIR``, else ``$OUT``, else ``./gpu-check-out``.
Exit status: 0 when the verdict is PASS, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.gpu_requirements import needed, requirement_name, unsatisfied  # noqa: E402

#: Seconds the whole run may take (the GPU machine's check must end within 8 minutes).
BUDGET = 450.0
#: Each part's own cap in seconds.
CAPS = {"install": 90.0, "environment": 60.0, "tests": 240.0, "sweep": 90.0, "benchmark": 150.0}
TESTS = ["tests/gpu", "tests/fuzz/test_cuda.py", "tests/fuzz/test_without_static_tools.py"]
#: What the sweep fuzzes, and how each target must end (status, then each problem's
#: code and field).
SWEEP_TARGETS = ["tests/fuzz/fixtures/step_sweep", "tests/fuzz/fixtures/cuda_events.py"]
_WORKER = "tests.fuzz.fixtures.step_sweep.worker"
EXPECTED_SWEEP = {
    f"{_WORKER}:WorkerInput": "PASS",
    f"{_WORKER}:ModelInput": "PASS",
    f"{_WORKER}:WorkerInput+{_WORKER}:ModelInput": "FAIL RC302 virtual_engine",
    "tests.fuzz.fixtures.cuda_events:EventInput": "PASS",
}
#: What the skip reason of a test that needs a GPU says.
NO_CUDA = "no CUDA device"

PROBE = r"""
import json, platform, sys
import torch
info = {"python": platform.python_version(), "executable": sys.executable,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(), "device_count": torch.cuda.device_count()}
print(json.dumps(info), flush=True)
extras = {
    "gpu": lambda: torch.cuda.get_device_name(0),
    "gpu_memory_gib": lambda: round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
    "capability": lambda: ".".join(map(str, torch.cuda.get_device_capability(0))),
    "nccl": lambda: str(torch.cuda.nccl.version()),
    "fp8": lambda: [n for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)],
}
for key, read in extras.items() if info["cuda_available"] else ():
    try:
        info[key] = read()
    except Exception as exc:
        info[key] = f"unknown ({type(exc).__name__}: {exc})"
print(json.dumps(info))
"""


class Log:
    """Lines to stdout and to the log file."""

    def __init__(self, path: Path) -> None:
        self.file: TextIO = path.open("a", encoding="utf-8")

    def __call__(self, line: str) -> None:
        print(line, flush=True)
        self.file.write(line + "\n")
        self.file.flush()


@dataclass
class Part:
    name: str
    status: str = "not run"
    seconds: float = 0.0
    timeout_s: float = 0.0
    exit_code: int | None = None
    output: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "seconds": round(self.seconds, 1),
            "timeout_s": round(self.timeout_s),
            "exit_code": self.exit_code,
        }


class Runner:
    def __init__(self, log: Log, budget: float, env: dict[str, str]) -> None:
        self.log = log
        self.deadline = time.monotonic() + budget
        self.env = env
        self.parts: dict[str, Part] = {}

    def run(self, name: str, command: list[str], env: dict[str, str] | None = None) -> Part:
        """Run ``command`` in its own session, its output streamed to the log; killed
        with every process it started when its time is up."""
        part = self.parts[name] = Part(name)
        part.timeout_s = max(0.0, min(CAPS[name], self.deadline - time.monotonic()))
        if part.timeout_s < 5:
            part.status = "skipped: the run's time budget is spent"
            self.log(f"== {name}: {part.status}")
            return part
        shown = " ".join(a if "\n" not in a else "<script>" for a in command)
        self.log(f"== {name} (at most {part.timeout_s:.0f} s): {shown}")
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                command,
                cwd=REPO,
                env=env or self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except OSError as exc:
            part.status = f"failed to start: {exc}"
            self.log(f"== {name}: {part.status}")
            return part
        assert proc.stdout is not None
        reader = threading.Thread(target=self._relay, args=(proc.stdout, part), daemon=True)
        reader.start()
        try:
            part.exit_code = proc.wait(timeout=part.timeout_s)
            part.status = "ok" if part.exit_code == 0 else f"failed (exit {part.exit_code})"
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            part.status = f"timed out after {part.timeout_s:.0f} s"
        reader.join(timeout=5)
        part.seconds = time.monotonic() - start
        self.log(f"== {name}: {part.status} in {part.seconds:.1f} s")
        return part

    def _relay(self, stream: TextIO, part: Part) -> None:
        for line in stream:
            line = line.rstrip("\n")
            part.output.append(line)
            self.log(f"   {line}")


def _kill_session(proc: subprocess.Popen[str]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue


# ------------------------------------------------------------------ install


def pip_env() -> dict[str, str]:
    """The environment for an offline pip: no configuration files, no PIP_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


#: Never installed by the check: it must be the interpreter's own (CUDA) build.
OWN = frozenset({"torch"})


def install_command(
    python: str, site: Path, wheelhouse: Path | None, requirements: list[str]
) -> list[str]:
    command = [python, "-m", "pip", "install", "--target", str(site), "--no-warn-script-location"]
    command += ["--only-binary=:all:", "--progress-bar", "off"]
    if wheelhouse is not None:
        command += ["--no-index", "--find-links", str(wheelhouse)]
    return command + requirements


def installed(output: list[str]) -> list[str]:
    for line in output:
        if line.strip().startswith("Successfully installed "):
            return line.split("Successfully installed ", 1)[1].split()
    return []


# ------------------------------------------------------------------ tests


def parse_junit(path: Path) -> dict[str, Any]:
    """Counts and every test case's outcome, message and recorded properties."""
    if not path.is_file():
        return {"error": f"{path.name} was not written"}
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return {"error": f"{path.name}: {exc}"}
    cases = []
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for child, name in (("failure", "failed"), ("error", "errors"), ("skipped", "skipped")):
            element = case.find(child)
            if element is not None:
                outcome, message = name, element.get("message", "")
                break
        counts[outcome] += 1
        properties = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        entry: dict[str, Any] = {
            "test": f"{case.get('classname', '')}::{case.get('name', '')}",
            "outcome": outcome,
            "seconds": round(float(case.get("time", "0") or 0), 2),
        }
        if message:
            entry["message"] = message.splitlines()[0][:300] if message.strip() else ""
        if properties:
            entry["properties"] = properties
        cases.append(entry)
    return {**counts, "cases": cases}


def sweep_command(python: str, report: Path, rehearse: bool) -> list[str]:
    """``runnercheck fuzz`` on the sweep's targets, its JSON report written to ``report``
    (the engine's and runnercheck's other lines go to the log)."""
    device = "cpu" if rehearse else "cuda"
    fuzz = [python, "-m", "runnercheck", "fuzz", *SWEEP_TARGETS, "--device", device]
    fuzz += ["--examples", "10", "--seed", "3", "--format", "json"]
    return ["sh", "-c", f"exec {' '.join(map(shlex.quote, fuzz))} > {shlex.quote(str(report))}"]


def sweep_outcomes(report: dict[str, Any]) -> dict[str, str]:
    """Each target of a fuzz JSON report: its status, then each problem's code and field."""
    out = {}
    for result in report.get("results", []):
        found = [f"{p['code']} {p['field']}" for p in result.get("problems", [])]
        out[result["target"]] = " ".join([result["status"], *sorted(found)])
    return out


def read_sweep(report: Path) -> dict[str, Any]:
    try:
        outcomes = sweep_outcomes(json.loads(report.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return {"error": f"{report.name}: {type(exc).__name__}: {exc}"}
    return {"outcomes": outcomes}


def pytest_command(python: str, junit: Path, rehearse: bool) -> list[str]:
    command = [python, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider"]
    if rehearse:
        command += ["-m", "gpu"]
    command += ["-o", "junit_family=xunit1", "--junitxml", str(junit)]
    command += ["-W", "ignore::pytest.PytestConfigWarning"]
    plugins = importlib.metadata.entry_points(group="pytest11")
    if not any(ep.value.startswith("runnercheck.") for ep in plugins):
        command += ["-p", "runnercheck.pytest_plugin"]  # runnercheck is not installed
    return command + TESTS


# ------------------------------------------------------------------ verdict


def verdict(summary: dict[str, Any], rehearse: bool) -> tuple[bool, str]:
    problems = [summary["error"]] if "error" in summary else []
    if "error" in summary.get("install", {}):
        problems.append(summary["install"]["error"])
    parts = summary["parts"]
    sweep = summary.get("sweep")
    for name, part in parts.items():
        # the sweep finds the leak it is made to find (exit 1): its outcomes judge it
        if name == "sweep" and part.get("exit_code") in (0, 1) and sweep is not None:
            continue
        if part["status"] != "ok":
            problems.append(f"{name}: {part['status']}")
    if sweep is not None and "error" in sweep:
        problems.append(f"sweep: {sweep['error']}")
    elif sweep is not None and sweep.get("outcomes") != EXPECTED_SWEEP:
        got = sweep.get("outcomes", {})
        wrong = [
            f"{target}: {got.get(target, 'missing')} (expected {want})"
            for target, want in EXPECTED_SWEEP.items()
            if got.get(target) != want
        ]
        wrong += [
            f"{target}: {got[target]} (not expected)"
            for target in got.keys() - EXPECTED_SWEEP.keys()
        ]
        problems.append(f"sweep: {'; '.join(wrong)}")
    tests = summary.get("tests", {})
    if "error" in tests:
        problems.append(f"tests: {tests['error']}")
    failed = [c["test"] for c in tests.get("cases", []) if c["outcome"] in ("failed", "errors")]
    if failed:
        problems.append(f"{len(failed)} tests failed ({', '.join(failed[:3])})")
    cases = tests.get("cases")
    skips = [c for c in cases or [] if c["outcome"] == "skipped"]
    if rehearse:
        if cases is not None and not skips:
            problems.append("no GPU test was collected")
        other = [c["test"] for c in skips if "CUDA" not in c.get("message", "")]
        if other or (cases is not None and tests.get("passed", 0)):
            problems.append(f"tests ran or skipped for another reason than no GPU: {other}")
    else:
        if cases is not None and tests.get("passed", 0) == 0:
            problems.append("no test passed")
        no_cuda = [c for c in skips if NO_CUDA in c.get("message", "")]
        if no_cuda:
            problems.append(f"{len(no_cuda)} tests skipped for want of a GPU")
    if not rehearse and not summary.get("environment", {}).get("cuda_available"):
        problems.append("torch sees no CUDA device")
    ok = not problems
    head = "GPU CHECK REHEARSAL" if rehearse else "GPU CHECK"
    if not ok:
        return False, f"{head} FAIL: " + "; ".join(problems)
    if rehearse:
        wheels = summary.get("install", {}).get("installed", [])
        figures = [
            f"offline install of {len(wheels)} distributions",
            f"{len(skips)} GPU tests collected and skipped (no GPU)",
            *(
                [f"directory sweep on the CPU: {len(EXPECTED_SWEEP)} targets as expected"]
                if sweep is not None
                else []
            ),
            "benchmark logic ran (--quick on the CPU: no figures)",
        ]
        return True, f"{head} PASS: " + ", ".join(figures)
    figures = [f"{tests.get('passed', 0)} tests passed"]
    if skips:
        reasons = sorted({c.get("message", "") for c in skips})
        figures.append(f"{len(skips)} skipped ({'; '.join(reasons)})")
    if sweep is not None:
        figures.append(
            f"directory sweep on CUDA: {len(EXPECTED_SWEEP)} targets as expected "
            "(the composed step's leaked key found)"
        )
    bench = summary.get("benchmark", {})
    decode = bench.get("step_dict", {}).get("decode", {}).get("two_over_one")
    if decode:
        figures.append(
            f"two broadcasts/one merged {decode['median']:.2f}x "
            f"({decode['min']:.2f}-{decode['max']:.2f}, decode step)"
        )
    for rt in bench.get("round_trips", []):
        if "round_trips_per_s" not in rt:
            continue
        rate = rt["round_trips_per_s"]["median"]
        figures.append(
            f"fuzz {rate:.0f} round trips/s ({rt['device']}, world size {rt['world_size']})"
        )
    return True, f"{head} PASS: " + ", ".join(figures)


# ------------------------------------------------------------------ main


def out_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    if os.environ.get("OUT"):
        return Path(os.environ["OUT"])
    return Path("gpu-check-out")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the JSON and log")
    parser.add_argument(
        "--wheelhouse", type=Path, default=REPO / ".whl", help="wheels to install from"
    )
    parser.add_argument("--rehearse", action="store_true", help="no GPU: CUDA parts skip")
    parser.add_argument("--budget", type=float, default=BUDGET, help="seconds for the whole run")
    args = parser.parse_args(argv)
    out = out_dir(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu_check.log")
    started = time.monotonic()
    python = sys.executable
    if args.rehearse and not any(args.wheelhouse.glob("*.whl")):
        parser.error(f"--rehearse installs from a wheelhouse; {args.wheelhouse} has no wheels")
    summary: dict[str, Any] = {
        "mode": "rehearsal" if args.rehearse else "gpu",
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "repo": str(REPO),
    }
    log(f"runnercheck GPU check ({summary['mode']}), python {python}, output in {out}")
    runner = Runner(log, args.budget, dict(os.environ))
    try:
        with tempfile.TemporaryDirectory(prefix="runnercheck-gpu-site-") as tmp:
            check(args, Path(tmp), out, runner, summary)
    except Exception as exc:  # reported in the JSON and the verdict, never lost
        log("".join(traceback.format_exception(exc)).rstrip())
        summary["error"] = f"the check itself failed: {type(exc).__name__}: {exc}"
    summary["parts"] = {name: p.as_json() for name, p in runner.parts.items()}
    return finish(summary, out, log, started, args.rehearse)


def check(
    args: argparse.Namespace, site: Path, out: Path, runner: Runner, summary: dict[str, Any]
) -> None:
    """Install, then run the parts; everything found goes into ``summary``."""
    log, python = runner.log, sys.executable
    wheelhouse = args.wheelhouse if any(args.wheelhouse.glob("*.whl")) else None
    lacking = unsatisfied(needed())
    own = [r for r in lacking if requirement_name(r) in OWN]
    summary["install"] = {
        "from": str(wheelhouse) if wheelhouse else "the package index",
        "offline": wheelhouse is not None,
        "requirements": needed(),
        "lacking": lacking,
        "installed": [],
    }
    if own:
        log(f"== {python} lacks {', '.join(own)}: run with PYTHON=<the python with CUDA torch>")
        summary["install"]["error"] = f"{python} lacks {', '.join(own)}"
        return
    if lacking:
        part = runner.run("install", install_command(python, site, wheelhouse, lacking), pip_env())
        summary["install"]["installed"] = installed(part.output)
    else:
        runner.parts["install"] = Part("install", status="ok")
        log("== install: nothing lacking")
    old = os.environ.get("PYTHONPATH")
    paths = [str(REPO), str(site), *([old] if old else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), PYTHONUNBUFFERED="1")
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if not args.rehearse:
        env["RUNNERCHECK_REQUIRE_CUDA"] = "1"
    runner.env = env
    summary["nvidia_smi"] = nvidia_smi()
    part = runner.run("environment", [python, "-c", PROBE])
    summary["environment"] = _last_json(part.output)
    if not (args.rehearse or summary["environment"].get("cuda_available")):
        log("== tests and benchmark not run: torch sees no CUDA device")
        return
    junit = out / "gpu_tests.xml"
    junit.unlink(missing_ok=True)
    runner.run("tests", pytest_command(python, junit, args.rehearse))
    summary["tests"] = parse_junit(junit)
    sweep_json = out / "gpu_sweep.json"
    sweep_json.unlink(missing_ok=True)
    runner.run("sweep", sweep_command(python, sweep_json, args.rehearse))
    summary["sweep"] = read_sweep(sweep_json)
    if summary["sweep"].get("outcomes") == EXPECTED_SWEEP:
        log("== sweep: every row as expected (its exit 1 is the composed step's finding)")
    bench_json = out / "gpu_bench.json"
    bench_json.unlink(missing_ok=True)
    command = [python, "benchmarks/bench_gpu.py", "--json", str(bench_json)]
    command += ["--device", "cpu", "--quick"] if args.rehearse else ["--device", "cuda"]
    runner.run("benchmark", command)
    try:
        summary["benchmark"] = json.loads(bench_json.read_text())
    except (OSError, ValueError) as exc:
        summary["benchmark"] = {"error": f"{bench_json.name}: {exc}"}


def finish(summary: dict[str, Any], out: Path, log: Log, started: float, rehearse: bool) -> int:
    """Write the JSON, print the verdict; the exit status."""
    summary.setdefault("parts", {})
    summary["seconds"] = round(time.monotonic() - started, 1)
    ok, line = verdict(summary, rehearse)
    summary["verdict"] = line
    (out / "gpu_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    log(f"{line} ({summary['seconds']:.0f} s; {out / 'gpu_check.json'})")
    return 0 if ok else 1


def nvidia_smi() -> str:
    """The GPU's name, driver and memory as nvidia-smi tells them ('' without it)."""
    if not shutil.which("nvidia-smi"):
        return ""
    query = ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    try:
        proc = subprocess.run(["nvidia-smi", *query], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"nvidia-smi failed: {exc}"
    return proc.stdout.strip() or proc.stderr.strip()


def _last_json(lines: list[str]) -> dict[str, Any]:
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return {}


if __name__ == "__main__":
    raise SystemExit(main())
