"""Where the plugin's settings come from, the supported mypy range, and the errors that
stop mypy with one line instead of a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mypy_plugin.config import read_settings
from mypy_plugin.version import UnsupportedMypyError, check_mypy_version, parse_version
from runnercheck.errors import ConfigError
from tests.mypy_plugin.mypy_run import REPO, copy_fixture, mypy, patched_mypy

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


@pytest.mark.parametrize(
    "version", ["1.9.0", "1.11.1", "1.15.0", "1.19.1", "2.0.0", "2.4.1", "2.4.0+dev.0123abc"]
)
def test_supported_versions(version: str) -> None:
    check_mypy_version(version)


@pytest.mark.parametrize("version", ["1.8.0", "0.991", "2.5.0", "3.0.0"])
def test_unsupported_versions(version: str) -> None:
    with pytest.raises(UnsupportedMypyError, match=r"supports mypy >=1\.9,<2\.5"):
        check_mypy_version(version)


def test_the_supported_range_is_the_one_declared_and_tested() -> None:
    """pyproject.toml's requirement, the plugin's check and the releases
    scripts/mypy_versions.sh runs the plugin's cases under all say the same range."""
    import tomllib

    from mypy_plugin.version import MAX_MYPY, MIN_MYPY, SUPPORTED

    with (REPO / "pyproject.toml").open("rb") as handle:
        dependencies = tomllib.load(handle)["project"]["dependencies"]
    assert f"mypy{SUPPORTED}" in dependencies
    script = (REPO / "scripts" / "mypy_versions.sh").read_text(encoding="utf-8")
    listed = re.search(r"^DEFAULT_VERSIONS=\(([^)]*)\)$", script, re.MULTILINE)
    assert listed is not None
    tested = sorted(parse_version(version) for version in listed[1].split())
    assert tested[0] == MIN_MYPY  # the lowest supported release is tested
    assert tested[-1] < MAX_MYPY and (tested[-1][0], tested[-1][1] + 1) == MAX_MYPY
    assert (1, 11) in tested  # the pin of the maintained vLLM forks


def test_unreadable_version() -> None:
    with pytest.raises(UnsupportedMypyError):
        parse_version("dev")


def test_mypy_outside_the_range_stops_with_one_line(tmp_path: Path) -> None:
    root = copy_fixture("incremental", tmp_path)
    proc = patched_mypy(root, "import mypy.version\nmypy.version.__version__ = '2.5.0'", "mid.py")
    assert proc.returncode == 2
    assert proc.stderr == (
        "runnercheck mypy plugin: error: mypy 2.5.0 is not supported "
        "(the runnercheck plugin supports mypy >=1.9,<2.5)\n"
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
    proc = patched_mypy(root, patch, "base.py", "inputs.py", "mid.py", "final.py")
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


def test_surprises_at_a_module_end_and_at_loading_are_errors(tmp_path: Path) -> None:
    """What fails where no class is being checked is said at the module's first line;
    checks that cannot be loaded at all (a mypy whose internals moved), once, at the
    first class."""
    root = copy_fixture("incremental", tmp_path)
    (root / "inputs.py").write_text(
        (root / "inputs.py").read_text().replace('{"tokens": self.tokens}', '{"f": print}')
    )
    files = ("base.py", "inputs.py", "mid.py", "final.py")
    late = (
        "import mypy_plugin.session as session\n"
        "def boom(self, pending): raise KeyError('gone')\n"
        "session.CheckRun._check_values_late = boom\n"
    )
    proc = patched_mypy(root, late, *files)
    assert (proc.stderr, proc.returncode) == ("", 1)
    assert proc.stdout.splitlines() == [
        'inputs.py:1: error: runnercheck plugin internal error at the end of module "inputs": '
        "KeyError: 'gone' (please report it)  [runnercheck-internal]",
        "Found 1 error in 1 file (checked 4 source files)",
    ]
    unloadable = "import sys\nsys.modules['mypy_plugin.session'] = None\n"
    proc = patched_mypy(root, unloadable, "--no-incremental", *files)
    assert (proc.stderr, proc.returncode) == ("", 1)
    assert proc.stdout.splitlines() == [
        "inputs.py:4: error: runnercheck plugin internal error: cannot load its checks "
        "(ModuleNotFoundError: import of mypy_plugin.session halted; None in sys.modules); "
        "the runner checks are off (please report it)  [runnercheck-internal]",
        "Found 1 error in 1 file (checked 4 source files)",
    ]


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


@pytest.mark.slow
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
