"""Where the plugin's settings come from, the supported mypy range, and the errors that
stop mypy with one line instead of a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mypy_plugin.config import read_settings
from mypy_plugin.version import UnsupportedMypyError, check_mypy_version, parse_version
from runnercheck.errors import ConfigError
from tests.mypy_plugin.mypy_run import copy_fixture, mypy

PYPROJECT = """\
[tool.runnercheck]
runner_bases = ["EngineRunner"]
broadcastable_types = ["pkg.Blob"]
"""


def test_ini_section_lists_and_strings(tmp_path: Path) -> None:
    ini = tmp_path / "mypy.ini"
    ini.write_text(
        "[mypy]\nplugins = mypy_plugin\n\n[runnercheck]\n"
        "runner_bases = ModelRunnerBase,\n  my.pkg.EngineRunner\n"
        "as_dict_method = to_wire\nignore = RC205\n"
    )
    settings = read_settings(str(ini), tmp_path)
    assert settings.config.runner_bases == ("ModelRunnerBase", "my.pkg.EngineRunner")
    assert settings.config.as_dict_method == "to_wire"
    assert settings.source == f"{ini} [runnercheck]"
    assert not settings.reports("RC205") and settings.reports("RC201")


def test_ini_without_section_reads_the_pyproject_beside_it(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text("[mypy]\nplugins = mypy_plugin\n")
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    settings = read_settings(str(tmp_path / "setup.cfg"), elsewhere)
    assert settings.config.runner_bases == ("EngineRunner",)
    assert settings.source == str(tmp_path / "pyproject.toml")


def test_pyproject_config_file_and_cwd_fallback(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.mypy]\nplugins = ["mypy_plugin"]\n' + PYPROJECT)
    assert read_settings(str(tmp_path / "pyproject.toml"), tmp_path).config.broadcastable_types == (
        "pkg.Blob",
    )
    sub = tmp_path / "sub"
    sub.mkdir()
    assert read_settings(None, sub).config.runner_bases == ("EngineRunner",)


def test_defaults_without_any_configuration(tmp_path: Path) -> None:
    settings = read_settings(None, tmp_path)
    assert settings.config.runner_bases == ("ModelRunnerBase", "GPUModelRunnerBase")
    assert settings.source == "defaults"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("bogus = 1\n", "[runnercheck] unknown key 'bogus'"),
        ("fuzz_strategies = x\n", "[runnercheck] key 'fuzz_strategies' can only be set in"),
    ],
)
def test_bad_ini_section_names_file_and_key(tmp_path: Path, section: str, message: str) -> None:
    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\n\n[runnercheck]\n" + section)
    with pytest.raises(ConfigError, match=r"^" + str(ini).replace(".", r"\.") + ": ") as info:
        read_settings(str(ini), tmp_path)
    assert message in str(info.value)


def test_select_and_ignore_by_code_name_and_prefix(tmp_path: Path) -> None:
    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\n[runnercheck]\nselect = RC2\nignore = unbroadcastable-value\n")
    settings = read_settings(str(ini), tmp_path)
    assert [c for c in ("RC201", "RC202", "RC205", "RC206") if settings.reports(c)] == [
        "RC201",
        "RC202",
        "RC206",
    ]
    ini.write_text("[mypy]\n[runnercheck]\nselect = RC101\n")
    assert not read_settings(str(ini), tmp_path).reports("RC201")


@pytest.mark.parametrize("version", ["2.4.0", "2.4.1", "2.5.3", "2.5.0+dev.0123abc"])
def test_supported_versions(version: str) -> None:
    check_mypy_version(version)


@pytest.mark.parametrize("version", ["2.3.9", "2.6.0", "3.0.0", "1.19.1"])
def test_unsupported_versions(version: str) -> None:
    with pytest.raises(UnsupportedMypyError, match=r"supports mypy >=2\.4,<2\.6"):
        check_mypy_version(version)


def test_unreadable_version() -> None:
    with pytest.raises(UnsupportedMypyError):
        parse_version("dev")


def run_patched_mypy(cwd: Path, patch: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Real mypy in a fresh interpreter after ``patch`` (Python source) ran."""
    code = f"{patch}\nimport sys\nfrom mypy.main import main\nsys.argv = ['mypy', *sys.argv[1:]]\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", code, "--cache-dir", str(cwd / ".mypy_cache"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_mypy_outside_the_range_stops_with_one_line(tmp_path: Path) -> None:
    root = copy_fixture("incremental", tmp_path)
    proc = run_patched_mypy(
        root, "import mypy.version\nmypy.version.__version__ = '2.6.0'", "mid.py"
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "runnercheck mypy plugin: error: mypy 2.6.0 is not supported "
        "(the runnercheck plugin supports mypy >=2.4,<2.6)\n"
    )
    assert proc.stdout == ""


def test_bad_configuration_stops_mypy_with_one_line(tmp_path: Path) -> None:
    root = copy_fixture("incremental", tmp_path)
    with (root / "mypy.ini").open("a") as handle:
        handle.write("\n[runnercheck]\nrunner_base = ModelRunnerBase\n")
    proc = mypy(root, "mid.py")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "runnercheck mypy plugin: error: mypy.ini: [runnercheck] unknown key 'runner_base'; "
        "did you mean 'runner_bases'?\n"
    )


def test_internal_surprise_is_an_error_not_a_crash(tmp_path: Path) -> None:
    root = copy_fixture("incremental", tmp_path)
    (root / "inputs.py").write_text(
        (root / "inputs.py").read_text().replace('{"tokens": self.tokens}', '{"f": print}')
    )
    patch = (
        "import mypy_plugin.runner_checks as rc\n"
        "def boom(self, t): raise LookupError('no such member')\n"
        "rc.RunnerChecker.check_protocol = boom\n"
    )
    proc = run_patched_mypy(root, patch, "base.py", "inputs.py", "mid.py", "final.py")
    assert proc.stderr == ""
    assert proc.stdout.splitlines() == [
        'inputs.py:9: error: Value for key "f" in the dict of "StepInput.as_broadcastable_tensor_'
        'dict" cannot be broadcast: its type overloaded function is a function  '
        "[unbroadcastable-value]",
        'mid.py:5: error: runnercheck plugin internal error while checking "mid.StepRunner": '
        "LookupError: no such member (please report it)  [runnercheck-internal]",
        'final.py:4: error: runnercheck plugin internal error while checking "final.TracingStep'
        'Runner": LookupError: no such member (please report it)  [runnercheck-internal]',
        "Found 3 errors in 3 files (checked 4 source files)",
    ]
    assert proc.returncode == 1


def test_changed_settings_invalidate_the_cache(tmp_path: Path) -> None:
    """report_config_data: the same sources, other settings, other results."""
    root = copy_fixture("pyproject", tmp_path)
    first = mypy(root, "wire")
    assert '"Handle" is not a tensor' in first.stdout
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            '["wire.blob.Blob"]', '["wire.blob.Blob", "wire.blob.Handle"]'
        )
    )
    second = mypy(root, "wire")
    assert "[unbroadcastable-value]" not in second.stdout
    assert second.stdout.count("\n") == first.stdout.count("\n") - 1


@pytest.mark.parametrize(
    ("config_name", "text", "line"),
    [
        (
            "mypy.ini",
            "[mypy]\nplugins = mypy_plugin\n\n[runnercheck]\nselect = RC2, RC999\n",
            "mypy.ini: [runnercheck] key 'select': unknown rule 'RC999'; did you mean 'RC109'?",
        ),
        (
            "pyproject.toml",
            '[tool.mypy]\nplugins = ["mypy_plugin"]\n\n'
            '[tool.runnercheck]\nignore = ["unbroadcastable-value", "no-such-rule"]\n',
            "pyproject.toml: [tool.runnercheck] key 'ignore': unknown rule 'no-such-rule'",
        ),
    ],
)
def test_unknown_rule_in_the_mypy_config_stops_mypy(
    tmp_path: Path, config_name: str, text: str, line: str
) -> None:
    """Otherwise ``select = RC999`` turns every rule off and mypy says "Success"."""
    root = copy_fixture("incremental", tmp_path)
    (root / "mypy.ini").unlink()
    (root / config_name).write_text(text)
    proc = mypy(root, "--config-file", config_name, "mid.py")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"runnercheck mypy plugin: error: {line} (see `runnercheck rules`)\n")


def test_rule_names_codes_and_prefixes_are_known(tmp_path: Path) -> None:
    ini = tmp_path / "mypy.ini"
    ini.write_text("[mypy]\n[runnercheck]\nselect = rc2, runner-input-protocol, RC101\n")
    settings = read_settings(str(ini), tmp_path)
    assert settings.reports("RC201") and not settings.reports("RC103")
