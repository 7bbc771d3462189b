"""Load ``runnercheck trace --timeline`` files with Perfetto's trace processor.

Traces the demo engine's legacy and merged runs at tp 2 (or takes the files given), loads
each with the trace processor of the ``perfetto`` package (``pip install perfetto``; it
fetches its binary on first use, which needs the network, or give ``--bin PATH``), and
checks what it imported against the file: every complete and instant event a slice, the
ranks' processes by name, nested slices, and no import error in its ``stats`` table.

Usage::

    python benchmarks/timeline_perfetto.py [--bin trace_processor_shell] [FILE ...]

Exit status 0 when every file loads as written, 1 when one does not, 2 when the trace
processor cannot be started here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def demo_timelines(directory: Path) -> list[Path]:
    files = []
    for shape in ("legacy", "merged"):
        path = directory / f"{shape}.json"
        engine = ["-m", "runnercheck.demo.engine", "--shape", shape, "--tp", "2", "--steps", "3"]
        trace = [sys.executable, "-m", "runnercheck", "trace", "--timeline", str(path)]
        subprocess.run([*trace, "--", sys.executable, *engine], check=True, cwd=REPO)
        files.append(path)
    return files


def rows(processor: Any, sql: str) -> list[Any]:
    return list(processor.query(sql))


def check(processor: Any, trace: dict[str, Any]) -> list[str]:
    events = trace["traceEvents"]
    expected = sum(e["ph"] == "X" or (e["ph"] == "i" and e.get("s") == "t") for e in events)
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    problems = []
    slices = rows(processor, "select count(*) as n from slice")[0].n
    if slices != expected:
        problems.append(f"{slices} slices imported, {expected} events in the file")
    imported = {row.name for row in rows(processor, "select name from process") if row.name}
    if not names <= imported:
        problems.append(f"processes {sorted(names - imported)} not imported")
    if expected and not rows(processor, "select id from slice where depth > 0 limit 1"):
        problems.append("no slice nests in another")
    errors = rows(
        processor,
        "select name, value from stats where severity in ('error', 'data_loss') and value > 0",
    )
    problems += [f"stats: {row.name} = {row.value}" for row in errors]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", help="a trace_processor_shell binary (default: fetched)")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args(argv)
    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError:
        print("cannot start the trace processor: pip install perfetto", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        files = args.files or demo_timelines(Path(scratch))
        failed = False
        for path in files:
            trace = json.loads(path.read_text())
            try:
                processor = TraceProcessor(
                    trace=str(path), config=TraceProcessorConfig(bin_path=args.bin)
                )
            except Exception as exc:  # its binary cannot be fetched or started
                print(f"cannot start the trace processor: {exc}", file=sys.stderr)
                return 2
            try:
                problems = check(processor, trace)
            finally:
                processor.close()
            failed |= bool(problems)
            verdict = "loads as written" if not problems else "; ".join(problems)
            print(f"{path.name}: {len(trace['traceEvents'])} events, {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
