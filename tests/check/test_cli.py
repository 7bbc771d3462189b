"""``runnercheck check`` as a user runs it: exit codes, formats, selection, suppression,
configuration, parallel runs, the prefilter and the terminal output."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from runnercheck import catalog
from runnercheck.check import check_sources
from runnercheck.rules import RULES
from tests.check.conftest import FIXTURES, REPO, CliResult

Run = Callable[..., CliResult]
CLI = FIXTURES / "cli"


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_nonexistent_path_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "check", "tests/check", "no/such/dir"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == "runnercheck: error: no/such/dir: no such file or directory\n"


def test_syntax_error_is_reported_and_the_rest_still_checked(run: Run) -> None:
    result = run(
        rel(FIXTURES / "syntax-error" / "bad.py"), rel(FIXTURES / "recursive-from-dict" / "bad.py")
    )
    codes = [line.split(": ")[1].split()[0] for line in result.finding_lines]
    assert codes == ["RC101", "RC101", "RC001"]
    assert result.code == 1
    assert result.summary.endswith("(2 files seen, 2 parsed, 0 skipped by the prefilter).")


def test_internal_error_does_not_stop_the_run(run: Run) -> None:
    """A file the checker cannot analyse is one RC002; the file beside it is checked."""
    expected = [
        *(FIXTURES / "internal-error" / "bad.expected").read_text().splitlines(),
        *(FIXTURES / "recursive-from-dict" / "bad.expected").read_text().splitlines(),
    ]
    result = run(
        "-j",
        "2",
        rel(FIXTURES / "internal-error" / "bad"),
        rel(FIXTURES / "recursive-from-dict" / "bad.py"),
    )
    assert result.finding_lines == expected
    assert "Traceback" not in result.out + result.err
    assert result.code == 1


def test_select_and_ignore(run: Run) -> None:
    both = [
        rel(FIXTURES / "recursive-from-dict" / "bad.py"),
        rel(FIXTURES / "unbroadcast-field" / "bad.py"),
    ]
    selected = run("--select", "RC101", *both)
    assert {line.split()[1] for line in selected.finding_lines} == {"RC101"}
    by_name = run("--select", "recursive-from-dict", *both)
    assert by_name.finding_lines == selected.finding_lines
    ignored = run("--ignore", "RC101,RC103", *both)
    assert ignored.finding_lines == [] and ignored.code == 0
    prefix = run("--select", "RC10", *both)
    assert len(prefix.finding_lines) == 5


def test_unknown_rule_is_a_usage_error(run: Run) -> None:
    result = run("--select", "RC999", rel(FIXTURES / "syntax-error" / "good.py"))
    assert result.code == 2
    assert result.out == ""
    assert (
        result.err == "runnercheck: error: --select: unknown rule 'RC999'; did you mean 'RC109'? "
        "(see `runnercheck rules`)\n"
    )


def test_inline_suppression(run: Run) -> None:
    result = run(rel(CLI / "suppression"))
    assert result.finding_lines == (CLI / "suppression" / "expected").read_text().splitlines()
    assert result.summary == (
        "Found 2 findings in 1 file (1 file seen, 1 parsed, 0 skipped by the prefilter, "
        "2 suppressed)."
    )


def test_config_from_pyproject_driver_only_exclude_ignore(run: Run) -> None:
    result = run(rel(CLI / "config" / "pkg"))
    # seq_lens is driver-only by config, skipped/ is excluded, RC104 is ignored
    assert result.finding_lines == [
        "tests/check/fixtures/cli/config/pkg/inputs.py:11:5: RC103 field 'lora_mapping' of "
        "ModelInputForCPU is not broadcast by ModelInputForCPU.as_broadcastable_tensor_dict and "
        "not declared driver-only: non-driver ranks see its default"
    ]
    assert "1 file seen" in result.summary


def test_config_file_option_replaces_pyproject(run: Run) -> None:
    args = ("--show-notes", "--config", rel(CLI / "config" / "other.toml"))
    result = run(*args, rel(CLI / "config" / "pkg"))
    codes = [
        line.split(": ", 1)[1].removeprefix("note: ").split()[0] for line in result.finding_lines
    ]
    # select = ["RC104"] (a copy that still sends what its parent sends is a note); the
    # parse error in the no longer excluded file is still reported
    assert codes == ["RC104", "RC001"]
    assert ": note: RC104 " in result.finding_lines[0]
    assert result.code == 1


def test_exclude_option(run: Run) -> None:
    result = run("--exclude", "bad", "--exclude", "*/good/*", rel(FIXTURES / "paired-broadcast"))
    assert result.finding_lines == []
    assert "0 files seen" in result.summary


def test_bad_config_is_one_line_exit_2(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[tool.runnercheck]\nbroadcast_functoin = "x"\n')
    result = run("--config", str(config), rel(FIXTURES / "syntax-error" / "good.py"))
    assert result.code == 2
    assert result.err == (
        f"runnercheck: error: {config}: [tool.runnercheck] unknown key 'broadcast_functoin'; "
        "did you mean 'broadcast_function'?\n"
    )


def test_prefilter_skips_files_and_reads_subclasses(run: Run) -> None:
    result = run("--show-notes", rel(CLI / "prefilter"))
    assert result.finding_lines == [
        "tests/check/fixtures/cli/prefilter/pooling.py:11:5: note: RC103 field 'pooling_metadata' "
        "of ModelInputForGPUWithPooling is not broadcast by "
        "ModelInputForGPU.as_broadcastable_tensor_dict and not declared driver-only: non-driver "
        "ranks see its default (note: no runner in the analysed files builds this class)"
    ]
    assert result.summary.endswith("(3 files seen, 2 parsed, 1 skipped by the prefilter, 1 note).")


def test_prefilter_reads_only_subclasses_that_can_take_part(run: Run) -> None:
    # backends.py names contract bases in annotations only: a subclass of its Backend
    # (which takes no part) is left alone, a subclass of its State (which holds a
    # runner) is read; each subclass has a syntax error that only parsing finds
    result = run(rel(CLI / "prefilter-subclasses"))
    assert result.code == 1
    assert result.finding_lines == [
        "tests/check/fixtures/cli/prefilter-subclasses/flash_state.py:6:14: RC001 cannot "
        "parse: '(' was never closed"
    ]
    assert result.summary.endswith("(3 files seen, 2 parsed, 1 skipped by the prefilter).")


def test_parallel_output_equals_serial(run: Run) -> None:
    serial = run("-j", "1", rel(FIXTURES))
    parallel = run("-j", "2", rel(FIXTURES))
    assert serial.code == parallel.code == 1
    assert parallel.out == serial.out
    assert len(serial.finding_lines) > 20


def test_json_output(run: Run) -> None:
    result = run("--format", "json", rel(FIXTURES / "unbroadcast-field"))
    data = json.loads(result.out)
    assert data["summary"] == {
        "findings": 3,
        "notes": 0,
        "files_seen": 2,
        "files_parsed": 2,
        "files_skipped": 0,
        "files_failed": 0,
        "suppressed": 0,
        "baselined": 0,
        "partner_files": 0,
    }
    first = data["findings"][0]
    assert first == {
        "path": "tests/check/fixtures/unbroadcast-field/bad.py",
        "line": 13,
        "col": 5,
        "code": "RC103",
        "message": first["message"],
        "severity": "error",
        "name": "unbroadcast-field",
    }
    assert data["notes"] == []
    assert result.code == 1


def test_sarif_output(run: Run) -> None:
    result = run("--format", "sarif", rel(FIXTURES / "recursive-from-dict" / "bad.py"))
    sarif = json.loads(result.out)
    assert sarif["version"] == "2.1.0"
    (sarif_run,) = sarif["runs"]
    assert sarif_run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": REPO.as_uri() + "/"}}
    rules = sarif_run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [r.code for r in RULES]
    rc101 = catalog.lookup(RULES, "RC101")
    descriptor = next(r for r in rules if r["id"] == "RC101")
    assert descriptor["name"] == rc101.name
    assert descriptor["shortDescription"]["text"] == rc101.summary
    assert descriptor["fullDescription"]["text"] == rc101.why
    assert rc101.bad in descriptor["help"]["text"] and rc101.good in descriptor["help"]["text"]
    results = sarif_run["results"]
    assert [r["ruleId"] for r in results] == ["RC101", "RC101"]
    assert rules[results[0]["ruleIndex"]]["id"] == "RC101"
    location = results[0]["locations"][0]["physicalLocation"]
    assert location == {
        "artifactLocation": {
            "uri": "tests/check/fixtures/recursive-from-dict/bad.py",
            "uriBaseId": "%SRCROOT%",
        },
        "region": {"startLine": 22, "startColumn": 16},
    }


def test_terminal_output_is_coloured() -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env["COLUMNS"] = "200"
    target = rel(FIXTURES / "recursive-from-dict" / "bad.py")
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "runnercheck", "check", target],
        cwd=REPO,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 1
    text = b"".join(chunks).decode()
    assert "\x1b[" in text  # ANSI colour
    assert "RC101" in text and "Found 2 findings" in text


def test_check_sources_in_memory() -> None:
    legacy = FIXTURES / "paired-broadcast" / "bad"
    sources = {p.name: p.read_text() for p in sorted(legacy.glob("*.py"))}
    result = check_sources(sources)
    assert [f.code for f in result.findings] == ["RC106"]
    merged = FIXTURES / "paired-broadcast" / "good"
    clean = check_sources({p.name: p.read_text() for p in sorted(merged.glob("*.py"))})
    assert clean.findings == [] and clean.files_parsed == 2


def test_partner_files_are_read_from_disk(run_built: Run) -> None:
    """A pre-commit hook passes only the worker: its runner is imported, so it is read
    (``paired-broadcast/bad``'s files in a package, built: ``tests.check.built``)."""
    engine = CLI / "partners" / "engine"
    result = run_built(rel(engine / "worker.py"))
    assert result.finding_lines == [
        "tests/check/fixtures/cli/partners/engine/worker.py:28:9: RC106 Worker and ModelRunner "
        "broadcast step metadata 2 times per step on the driver path (worker.py:28, "
        "model_runner.py:20) and 2 on the non-driver path (worker.py:35, model_runner.py:22); "
        "merge them into one broadcast: run `runnercheck migrate`"
    ]
    assert result.summary.endswith(
        "(1 file seen, 1 parsed, 0 skipped by the prefilter, 2 imported files read for context)."
    )
    # findings located in partner files are not reported: the runner alone is fine
    alone = run_built(rel(engine / "model_runner.py"))
    assert alone.finding_lines == [] and alone.code == 0


def test_unreadable_file_is_reported_and_others_checked(run: Run, tmp_path: Path) -> None:
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    good = FIXTURES / "recursive-from-dict" / "bad.py"
    (tmp_path / "inputs.py").write_bytes(good.read_bytes())
    result = run(str(tmp_path))
    assert result.finding_lines[0] == (
        f"{tmp_path}/dangling.py:1:1: RC001 broken symbolic link: not read"
    )
    assert [line.split()[1] for line in result.finding_lines[1:]] == ["RC101", "RC101"]
    assert result.code == 1
