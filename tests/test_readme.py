"""The README and the manuals in docs/ stay true: the README is a landing page of at
most 300 lines whose links (and the manuals' links) resolve; the rule, codemod and
configuration tables are the catalog's, the registry's and the configuration model's;
every `runnercheck ...` command shown parses with the real CLI; the mypy snippet and the
LibCST command work."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from codemods.framework import registry
from runnercheck import cli, diagnostic_formats
from runnercheck.check import check_paths
from runnercheck.commands import rules
from runnercheck.commands.registry import NAMES as COMMAND_NAMES
from runnercheck.config import Config
from runnercheck.demo.engine import engine_source_dir
from tests.vllm_wheels import vllm_source

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MANUALS = sorted(DOCS.glob("*.md"))
#: the manual of each tool, which the README links to
TOOL_MANUALS = (
    "install", "check", "mypy", "migrate", "fuzz", "trace", "rules", "configuration", "ci",
)  # fmt: skip


def readme() -> str:
    return README.read_text(encoding="utf-8")


def manual(name: str) -> str:
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")


def test_readme_is_a_landing_page_that_links_every_manual() -> None:
    text = readme()
    assert len(text.splitlines()) <= 300
    linked = set(re.findall(r"\]\(docs/([\w-]+)\.md[)#]", text))
    assert set(TOOL_MANUALS) <= linked, set(TOOL_MANUALS) - linked
    assert {path.stem for path in MANUALS} - {"README"} <= linked | {"README"}


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text, found, fenced = path.read_text(encoding="utf-8"), set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


@pytest.mark.parametrize("doc", [README, *MANUALS], ids=lambda p: p.name)
def test_links_resolve(doc: Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for link in links:
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        target, _, fragment = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.name}: {link} does not exist"
        if fragment:
            assert fragment in anchors(path), f"{doc.name}: no heading #{fragment} in {target}"


def table(text: str, marker: str) -> str:
    match = re.search(rf"<!-- {marker}:begin -->\n(.*?)\n<!-- {marker}:end -->", text, re.S)
    assert match, f"lost the {marker}-table markers"
    return match.group(1).strip()


def test_rule_table_matches_catalog() -> None:
    assert table(manual("rules"), "rules") == rules.markdown_table()


def test_codemod_table_matches_the_registry() -> None:
    assert table(manual("migrate"), "codemods") == registry.markdown_table()


def test_configuration_table_lists_every_key_of_the_model() -> None:
    section = manual("configuration").split("| key | default | meaning |", 1)[1]
    rows = [line for line in section.splitlines()[2:] if line.startswith("| `")]
    documented = {key.strip(" `") for row in rows for key in row.split("|")[1].split(" / ")}
    assert documented == {f.name for f in fields(Config)}


def shown_commands() -> list[tuple[str, str]]:
    """Every `runnercheck ...` line of the bash blocks of the README and the manuals."""
    found = []
    for doc in [README, *MANUALS]:
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
            for text in block.splitlines():
                for line in text.split(" # ")[0].split("&&"):
                    line = line.strip()
                    if line.startswith(("runnercheck ", ".venv/bin/runnercheck ")):
                        found.append((doc.name, line))
    return found


def test_every_command_shown_parses_with_the_cli() -> None:
    commands = shown_commands()
    assert len(commands) >= 20
    parser = cli.build_parser()
    for doc, line in commands:
        argv = shlex.split(line)[1:]
        try:
            args, unknown = parser.parse_known_args(argv)
        except SystemExit:
            raise AssertionError(f"{doc}: {line!r} does not parse") from None
        assert not unknown or args._pass_through, f"{doc}: {line!r}: unknown {unknown}"
    shown = {shlex.split(line)[1] for _doc, line in commands}
    assert set(COMMAND_NAMES) <= shown, set(COMMAND_NAMES) - shown


def test_readme_starts_with_the_two_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", readme(), re.S)
    commands = [line for line in blocks[0].splitlines() if not line.startswith("#")]
    assert commands == [
        "bash scripts/setup.sh && .venv/bin/runnercheck demo",
        "bash scripts/test.sh",
    ]


def mypy_ini_snippet() -> str:
    match = re.search(r"```ini\n# mypy.ini or setup.cfg\n(.*?)```", manual("mypy"), re.S)
    assert match, "docs/mypy.md lost its mypy.ini snippet"
    return match.group(1)


def run_mypy(cwd: Path, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-error-summary", target],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
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
    """docs/migrate.md's `python -m libcst.tool codemod ...` line, exactly as written, in
    a directory of its own: it rewrites the file and needs no formatter."""
    (line,) = re.findall(r"`(python -m libcst\.tool codemod [^`]*)`", manual("migrate"))
    argv = shlex.split(line)
    assert argv[0] == "python" and argv[-1] == "file.py"
    single = Path(__file__).resolve().parent / "migrate" / "fixtures" / "single"
    shutil.copy(single / "self_typed_before.py", tmp_path / "file.py")
    proc = subprocess.run(
        [sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "file.py").read_bytes() == (single / "self_typed_after.py").read_bytes()


def _shown_fuzz_runs() -> list[tuple[str, list[str]]]:
    """Each ``$ runnercheck fuzz ...`` example of the fuzz manual with the lines it shows."""
    runs = []
    for block in re.findall(r"```text\n(.*?)```", manual("fuzz"), re.S):
        lines = block.splitlines()
        if lines and lines[0].startswith("$ runnercheck fuzz "):
            runs.append((lines[0][2:], lines[1:]))
    return runs


@pytest.mark.parametrize("command,shown", _shown_fuzz_runs(), ids=lambda v: str(v)[:40])
def test_the_fuzz_manual_shows_what_its_examples_print(command: str, shown: list[str]) -> None:
    argv = shlex.split(command)[1:]
    run = subprocess.run(
        [sys.executable, "-m", "runnercheck", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    printed = [line for line in run.stdout.splitlines() if not line.startswith("  (tensor")]
    # the manual leaves out the header line and the note on dtypes this transport skips
    assert printed[1:] == shown, run.stderr


def release_table() -> list[tuple[str, int, int, int, int]]:
    """(release, files seen, files parsed, errors, notes) of each row of the check
    manual's table of what `check` finds on vLLM releases."""
    section = manual("check").split("## What it finds on real vLLM releases", 1)[1]
    rows = re.findall(
        r"^\| (\d[\w.]*) \| (\d+) / (\d+) \| (\d+): [^|]*\| (\d+)[:,] ", section, re.M
    )
    assert len(rows) >= 5, "the check manual lost its table of releases"
    return [(release, *map(int, counts)) for release, *counts in rows]


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("release,seen,parsed,errors,notes", release_table(), ids=lambda v: str(v))
def test_the_check_manuals_release_table_is_what_check_finds(
    release: str,
    seen: int,
    parsed: int,
    errors: int,
    notes: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`runnercheck check vllm/` on each release's wheel (downloaded once, then cached):
    the files seen and parsed, the errors and the notes, as the table counts them."""
    monkeypatch.chdir(vllm_source(release))
    result = check_paths(["vllm"])
    found = (result.files_seen, result.files_parsed, len(result.findings), len(result.notes))
    assert found == (seen, parsed, errors, notes)


def test_the_check_manuals_demo_output_is_what_check_prints() -> None:
    """The check manual's run on the demo's legacy engine, line for line."""
    blocks = re.findall(
        r"```text\n(\$ runnercheck check runnercheck/demo/[^\n]*)\n(.*?)```", manual("check"), re.S
    )
    assert len(blocks) == 1, "the check manual lost its run on the demo engine"
    command, shown = blocks[0]
    run = subprocess.run(
        [sys.executable, "-m", "runnercheck", *shlex.split(command)[2:], "--no-cache"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines() == shown.splitlines()


def shown_release_lines() -> list[tuple[str, str]]:
    """(release, line) for each finding the check manual shows under `$ runnercheck
    check vllm/          # the vLLM X wheel`."""
    shown = []
    for release, block in re.findall(
        r"```text\n\$ runnercheck check vllm/ +# the vLLM ([\w.]+) wheel\n(.*?)```",
        manual("check"),
        re.S,
    ):
        shown += [(release, line) for line in block.splitlines()]
    assert shown, "the check manual lost its runs on vLLM releases"
    return shown


@pytest.mark.vllm
def test_the_check_manuals_release_lines_are_what_check_prints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    printed: dict[str, set[str]] = {}
    for release, line in shown_release_lines():
        if release not in printed:
            monkeypatch.chdir(vllm_source(release))
            printed[release] = {diagnostic_formats.text(f) for f in check_paths(["vllm"]).findings}
        assert line in printed[release], (release, line)


@pytest.mark.vllm
def test_the_quick_starts_first_check_is_what_check_prints_on_vllm_050() -> None:
    """The README's `runnercheck check vllm/` on vLLM 0.5.0: each finding (shown up to
    its "...") and the summary line, as the command prints them."""
    block = readme().split("$ runnercheck check vllm/ ", 1)[1].split("```", 1)[0]
    shown = block.splitlines()[1:]
    assert shown[-1].startswith("Found 4 findings"), shown
    run = subprocess.run(
        [sys.executable, "-m", "runnercheck", "check", "--no-cache", "vllm/"],
        capture_output=True,
        text=True,
        cwd=vllm_source("0.5.0"),
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        timeout=120,
    )
    printed = run.stdout.splitlines()
    assert run.returncode == 1, run.stderr
    assert len(printed) == len(shown)
    for line, real in zip(shown, printed, strict=True):
        assert real.startswith(line.removesuffix(" ...").removesuffix("...")), (line, real)
