"""The README stays true: its rule table is the catalog's, its mypy snippet works."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from codemods import registry
from runnercheck.commands import rules
from runnercheck.demo.engine import engine_source_dir

README = Path(__file__).resolve().parent.parent / "README.md"


def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_rule_table_matches_catalog() -> None:
    match = re.search(r"<!-- rules:begin -->\n(.*?)\n<!-- rules:end -->", readme(), re.S)
    assert match, "README lost its rule-table markers"
    assert match.group(1).strip() == rules.markdown_table()


def test_codemod_table_matches_the_registry() -> None:
    match = re.search(r"<!-- codemods:begin -->\n(.*?)\n<!-- codemods:end -->", readme(), re.S)
    assert match, "README lost its codemod-table markers"
    assert match.group(1).strip() == registry.markdown_table()


def test_readme_starts_with_the_two_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", readme(), re.S)
    commands = [line for line in blocks[0].splitlines() if not line.startswith("#")]
    assert commands == [
        "bash scripts/setup.sh && .venv/bin/runnercheck demo",
        "bash scripts/test.sh",
    ]


def mypy_ini_snippet() -> str:
    match = re.search(r"```ini\n# mypy.ini or setup.cfg\n(.*?)```", readme(), re.S)
    assert match, "README lost its mypy.ini snippet"
    return match.group(1)


def run_mypy(cwd: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-error-summary", target],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_readme_mypy_snippet_on_merged_engine_and_a_broken_variant(tmp_path: Path) -> None:
    (tmp_path / "mypy.ini").write_text(mypy_ini_snippet(), encoding="utf-8")
    engine = tmp_path / "engine"
    shutil.copytree(
        engine_source_dir("merged"), engine, ignore=shutil.ignore_patterns("__pycache__")
    )
    clean = run_mypy(tmp_path, "engine")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout == ""

    runner = engine / "cpu_model_runner.py"
    text = runner.read_text(encoding="utf-8")
    start = text.index("    def from_broadcasted_tensor_dict(")
    end = text.index(":\n", text.index(")", start)) + 2
    header = text[start:end]
    broken_header = re.sub(r"cls: Type\[\w+\]", "cls", header)
    broken_header = re.sub(r"-> [\w\"]+:", '-> "CPUModelInput":', broken_header)
    assert broken_header != header
    runner.write_text(text.replace(header, broken_header), encoding="utf-8")
    broken = run_mypy(tmp_path, "engine")
    assert broken.returncode == 1
    lines = broken.stdout.splitlines()
    assert len(lines) == 1, broken.stdout
    assert lines[0].startswith("engine/cpu_model_runner.py:")
    assert lines[0].endswith("[from-dict-fixed-return]")


def test_readme_libcst_command_runs_verbatim(tmp_path: Path) -> None:
    """The README's `python -m libcst.tool codemod ...` line, exactly as written, in a
    directory of its own: it rewrites the file and needs no formatter."""
    (line,) = re.findall(r"`(python -m libcst\.tool codemod [^`]*)`", readme())
    argv = shlex.split(line)
    assert argv[0] == "python" and argv[-1] == "file.py"
    single = Path(__file__).resolve().parent / "migrate" / "fixtures" / "single"
    shutil.copy(single / "self_typed_before.py", tmp_path / "file.py")
    proc = subprocess.run(
        [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "file.py").read_bytes() == (single / "self_typed_after.py").read_bytes()
