"""What ``migrate`` reads and loads when it has little to do: a file that mentions a
runner only in passing is not read, and output that is not a terminal is plain text
(rich is not loaded)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from runnercheck.analysis.prefilter import select_sources
from runnercheck.contract import VLLM
from runnercheck.demo.engine import engine_source_dir

SOURCES = {
    # named like a runner, and no contract name: read (migrate notes such a pair)
    "tpu_model_runner.py": b"class TPUModelRunner:\n    def execute_model(self):\n        pass\n",
    # a runner named only in a comment, a string or an attribute path: not read
    "attention.py": b"# updated from `CUDAGraphRunner.forward`\nclass Backend:\n    pass\n",
    "loader.py": b"def load(engine):\n    return engine.driver_worker.model_runner.model\n",
    # a subclass of a class read: read
    "more.py": b"class Faster(TPUModelRunner):\n    pass\n",
}


def test_only_files_that_define_a_runner_or_a_worker_by_name_are_read() -> None:
    assert select_sources(SOURCES, VLLM, runners=True) == ["tpu_model_runner.py", "more.py"]
    assert select_sources(SOURCES, VLLM, runners=False) == []


def test_a_run_with_nothing_to_change_prints_plain_text_without_rich(tmp_path: Path) -> None:
    tree = shutil.copytree(engine_source_dir("merged"), tmp_path / "engine")
    code = (
        "import sys; from runnercheck.cli import main; code = main(sys.argv[1:]); "
        "print('exit', code, 'rich' in sys.modules, 'libcst' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "migrate", "--check", str(tree)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[-1] == "exit 0 False False"
    assert lines[-9].startswith("runnercheck migrate --check (nothing written)")
    assert lines[-8].split() == ["codemod", "would", "change", "unchanged", "refused"]
    assert lines[-7].split()[:2] == ["merge-broadcasts", "0"]
    assert not any(ch in proc.stdout for ch in "┏┃│")
