"""One ignore mechanism for ``check``'s findings and ``migrate``'s refusals: ``ignore``,
``per_file_ignores`` and ``# runnercheck: ignore[CODE]``, run as the real commands on
copies of a tree ``migrate`` refuses (MIG101) and of the demo's legacy engine (RC106)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from runnercheck import ignores
from runnercheck.errors import UsageError
from runnercheck.excludes import Excludes
from runnercheck.ignores import PerFileIgnores, codes_of, suppressed, suppressions
from tests.migrate import refusals

ROOT = Path(__file__).resolve().parents[1]
#: the refused tree (MIG101) of ``tests.migrate.refusals``
REFUSED = "extra-broadcast"
LEGACY = ROOT / "runnercheck" / "demo" / "engine" / "legacy"


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def project(tmp_path: Path, source: Path | str, table: str) -> Path:
    """``source`` (a directory, or the name of a refused tree) copied to ``pkg`` under a
    ``pyproject.toml`` with the ``[tool.runnercheck]`` table ``table``."""
    if isinstance(source, str):
        tree = refusals.write(source, tmp_path / "pkg")
    else:
        tree = Path(shutil.copytree(source, tmp_path / "pkg"))
    (tmp_path / "pyproject.toml").write_text(f"[tool.runnercheck]\n{table}", encoding="utf-8")
    return tree


@pytest.mark.slow
def test_a_refusal_fails_migrate_check_until_the_project_ignores_it(tmp_path: Path) -> None:
    tree = project(tmp_path, REFUSED, "")
    refused = cli(tmp_path, "migrate", "--check", "--no-cache", "pkg")
    assert refused.returncode == 1 and "MIG101" in refused.stdout, refused.stdout
    for table in (
        'ignore = ["MIG101"]\n',
        'per_file_ignores = {"pkg/model_runner.py" = ["MIG1"]}\n',
    ):
        (tmp_path / "pyproject.toml").write_text(f"[tool.runnercheck]\n{table}", encoding="utf-8")
        quiet = cli(tmp_path, "migrate", "--check", "--no-cache", "pkg")
        assert quiet.returncode == 0, (table, quiet.stdout, quiet.stderr)
        assert "MIG101 [" not in quiet.stdout
        assert "1 refusal ignored by the configuration (MIG101 1)" in quiet.stdout
    # the refused code stays as it was: ignoring a refusal rewrites nothing it protects
    before = (tree / "model_runner.py").read_bytes()
    assert cli(tmp_path, "migrate", "--no-cache", "pkg").returncode == 0
    assert (tree / "model_runner.py").read_bytes() == before


@pytest.mark.slow
def test_an_inline_comment_on_the_refused_line_hides_that_code_only(tmp_path: Path) -> None:
    tree = project(tmp_path, REFUSED, "")
    runner = tree / "model_runner.py"
    refused = cli(tmp_path, "migrate", "--check", "--no-cache", "pkg")
    line = int(refused.stdout.split("model_runner.py:", 1)[1].split(":", 1)[0])
    lines = runner.read_text(encoding="utf-8").splitlines(keepends=True)
    other = lines[line - 1].rstrip("\n") + "  # runnercheck: ignore[MIG102]\n"
    runner.write_text("".join([*lines[: line - 1], other, *lines[line:]]), encoding="utf-8")
    assert cli(tmp_path, "migrate", "--check", "--no-cache", "pkg").returncode == 1
    hidden = lines[line - 1].rstrip("\n") + "  # runnercheck: ignore[MIG101]\n"
    runner.write_text("".join([*lines[: line - 1], hidden, *lines[line:]]), encoding="utf-8")
    quiet = cli(tmp_path, "migrate", "--check", "--no-cache", "pkg")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr


def test_per_file_ignores_hide_check_findings_in_matching_files_only(tmp_path: Path) -> None:
    project(tmp_path, LEGACY, "")
    found = cli(tmp_path, "check", "--no-cache", "pkg")
    assert found.returncode == 1 and found.stdout.count("RC106") == 3, found.stdout
    table = 'per_file_ignores = {"pkg/cpu_model_runner.py" = ["RC106"], "nowhere/*" = ["RC1"]}\n'
    (tmp_path / "pyproject.toml").write_text(f"[tool.runnercheck]\n{table}", encoding="utf-8")
    fewer = cli(tmp_path, "check", "--no-cache", "pkg")
    assert fewer.returncode == 1 and fewer.stdout.count("RC106") == 2, fewer.stdout
    assert "cpu_model_runner.py:" not in fewer.stdout
    assert "per_file_ignores['nowhere/*'] matches no file of this run" in fewer.stderr


def test_an_unknown_code_in_per_file_ignores_is_one_line_naming_the_key(tmp_path: Path) -> None:
    project(tmp_path, LEGACY, 'per_file_ignores = {"pkg/*" = ["MIG9999"]}\n')
    for command in ("check", "migrate"):
        done = cli(tmp_path, command, "--no-cache", "pkg")
        assert done.returncode == 2, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert (
            len(lines) == 1 and "key 'per_file_ignores.pkg/*': unknown rule 'MIG9999'" in lines[0]
        )


@pytest.mark.parametrize(
    ("comment", "code", "hidden"),
    [
        ("x = 1  # runnercheck: ignore[MIG101, RC106]", "MIG101", True),
        ("x = 1  # runnercheck: ignore[RC106]", "MIG101", False),
        ("x = 1  # RunnerCheck: IGNORE", "MIG204", True),
        ("x = 1  # runnercheck ignore[MIG101]", "MIG101", False),
    ],
)
def test_inline_comments(comment: str, code: str, hidden: bool) -> None:
    assert suppressed(suppressions(f"y = 0\n{comment}\n"), 2, code) is hidden


def test_per_file_globs_match_as_exclude_does_and_codes_expand(tmp_path: Path) -> None:
    ignores = PerFileIgnores({"tests": ["MIG2"], "*_worker.py": ["RC106"]}, tmp_path)
    assert ignores.hides("MIG204", tmp_path / "tests" / "a.py")
    assert not ignores.hides("MIG101", tmp_path / "tests" / "a.py")
    assert ignores.hides("RC106", tmp_path / "pkg" / "cpu_worker.py")
    assert not ignores.hides("RC106", tmp_path / "pkg" / "worker_base.py")
    assert ignores.unmatched("x") == []
    assert "MIG204" in codes_of(["MIG2"], "ignore") and "MIG101" not in codes_of(["MIG2"], "i")


def test_a_file_is_matched_once_and_unmatched_tries_only_the_globs_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each glob is matched once per file however often the file is asked about; the
    files a run saw are tried against the globs nothing matched yet, until none is."""
    tried: Counter[tuple[str, str]] = Counter()

    class Counting(Excludes):
        def __init__(self, patterns: list[str]) -> None:
            [self.glob] = patterns
            super().__init__(patterns)

        def __call__(self, display: str, relative: str) -> bool:
            tried[(relative, self.glob)] += 1
            return super().__call__(display, relative)

    monkeypatch.setattr(ignores, "Excludes", Counting)
    per_file = PerFileIgnores({"pkg/*": ["RC106"], "other/*": ["RC101"]}, tmp_path)
    asked = tmp_path / "pkg" / "a.py"
    for _ in range(3):
        assert per_file.hides("RC106", asked) and not per_file.hides("RC101", asked)
    assert tried == {("pkg/a.py", "pkg/*"): 1, ("pkg/a.py", "other/*"): 1}
    tried.clear()
    seen = [asked, tmp_path / "pkg" / "b.py", tmp_path / "other" / "c.py", tmp_path / "d.py"]
    assert per_file.unmatched("x", seen) == []
    # a.py was asked about; b.py and c.py try the one glob left, which c.py matches
    assert tried == {("pkg/b.py", "other/*"): 1, ("other/c.py", "other/*"): 1}
    fresh = PerFileIgnores({"pkg/*": ["RC106"], "nowhere/*": ["RC101"]}, tmp_path)
    assert fresh.unmatched("x", seen) == [
        "x: note: per_file_ignores['nowhere/*'] matches no file of this run"
    ]


@pytest.mark.slow
def test_migrate_reports_an_unparsable_file_as_check_does_and_the_old_codes_still_hide_it(
    tmp_path: Path,
) -> None:
    """A file that does not parse is RC001 for both commands; ``MIG001`` and ``MIG002``,
    migrate's codes for it before, are accepted wherever a code is named and mean RC001."""
    tree = tmp_path / "pkg"
    tree.mkdir()
    (tree / "worker.py").write_text("def prepare_model_input(self, x:\n", encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.runnercheck]\n", encoding="utf-8")
    refused = cli(tmp_path, "migrate", "--check", "--no-cache", "pkg")
    checked = cli(tmp_path, "check", "--no-cache", "pkg")
    assert "pkg/worker.py:1: RC001 [parse] does not parse" in refused.stdout, refused.stdout
    assert "pkg/worker.py:1:" in checked.stdout and " RC001 " in checked.stdout, checked.stdout
    for table in (
        'ignore = ["MIG001"]\n',
        'ignore = ["MIG002"]\n',
        'per_file_ignores = {"pkg/*" = ["MIG001"]}\n',
    ):
        (tmp_path / "pyproject.toml").write_text(f"[tool.runnercheck]\n{table}", encoding="utf-8")
        for command in ("migrate", "check"):
            quiet = cli(
                tmp_path, command, "--no-cache", *(("--check",) * (command == "migrate")), "pkg"
            )
            assert "pkg/worker.py" not in quiet.stdout, (table, command, quiet.stdout)
            assert quiet.returncode == 0, (table, command, quiet.stdout, quiet.stderr)


def test_the_old_codes_of_a_file_not_read_are_aliases_of_rc001() -> None:
    from runnercheck import catalog
    from runnercheck.rules.outcomes import parse_codes

    assert codes_of(["MIG001", "MIG002"], "ignore") == {"RC001"}
    assert parse_codes(["mig001"], "--ignore") == {"RC001"}
    assert catalog.get("MIG002").code == "RC001"
    assert "MIG001" not in {rule.code for rule in catalog.all_rules()}
    assert "MIG001" not in catalog.CODES
    assert suppressed(suppressions("x = (  # runnercheck: ignore[MIG001]\n"), 1, "RC001")
    assert not suppressed(suppressions("x = (  # runnercheck: ignore[MIG101]\n"), 1, "RC001")


def test_a_rule_is_named_by_code_name_or_prefix_in_every_tool() -> None:
    """``per_file_ignores`` and ``migrate``'s ignore read names as ``select`` does: the
    name of a rule of ``check`` too, not only of the plugin's or the validator's."""
    from runnercheck.rules.outcomes import parse_codes

    for words in (["recursive-from-dict"], ["RC101"], ["rc101"]):
        assert codes_of(words, "ignore") == {"RC101"} == parse_codes(words, "--ignore")
    assert codes_of(["runner-input-protocol"], "ignore") == {"RC201"}
    assert codes_of(["MIG2"], "ignore") == {"MIG201", "MIG202", "MIG203", "MIG204"}
    with pytest.raises(UsageError, match="unknown rule 'extra-broadcast'"):
        codes_of(["extra-broadcast"], "ignore")  # a reason of migrate is named by code
