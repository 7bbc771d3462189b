"""[tool.runnercheck]: defaults, overrides and one-line errors with exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.config import Config, load_config
from runnercheck.contract import VLLM, is_driver_only_metadata
from runnercheck.errors import ConfigError


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_defaults_match_vllm(tmp_path: Path) -> None:
    write(tmp_path, "[project]\nname = 'x'\n")
    config = load_config(tmp_path)
    assert config.contract() == VLLM
    assert config.broadcast_function == "broadcast_tensor_dict"
    assert config.runner_bases == ("ModelRunnerBase", "GPUModelRunnerBase")


def test_nearest_pyproject_is_used(tmp_path: Path) -> None:
    write(tmp_path, "[tool.runnercheck]\nbroadcast_function = 'bcast'\n")
    nested = tmp_path / "pkg" / "sub"
    nested.mkdir(parents=True)
    (nested / "mod.py").write_text("x = 1\n")
    assert load_config(nested / "mod.py").broadcast_function == "bcast"


def test_override_and_driver_only(tmp_path: Path) -> None:
    write(tmp_path, "[tool.runnercheck]\ndriver_only = ['ModelInput.seq_lens']\n")
    config = load_config(tmp_path)
    assert config.is_driver_only("ModelInput", "seq_lens")
    assert not config.is_driver_only("ModelInput", "input_tokens")


def test_driver_only_metadata_marker() -> None:
    assert is_driver_only_metadata({"runnercheck": "driver-only"})
    assert is_driver_only_metadata({"driver_only": True})
    assert not is_driver_only_metadata({"driver_only": "yes"})
    assert is_driver_only_metadata({"skip": True}, key="skip")
    assert not is_driver_only_metadata({})
    assert not is_driver_only_metadata(None)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[tool.runnercheck]\nbogus = 1\n", "[tool.runnercheck] unknown key 'bogus'"),
        (
            "[tool.runnercheck]\nbroadcast_function = 3\n",
            "[tool.runnercheck] key 'broadcast_function': expected a string, got an integer",
        ),
        (
            '[tool.runnercheck]\nexclude = "tests/*"\n',
            "[tool.runnercheck] key 'exclude': expected an array of strings, got a string",
        ),
        (
            "[tool.runnercheck]\nexclude = [1]\n",
            "[tool.runnercheck] key 'exclude[0]': expected a string, got an integer",
        ),
        (
            "[tool.runnercheck]\nfuzz_strategies = []\n",
            "[tool.runnercheck] key 'fuzz_strategies': expected a table of strings, got an array",
        ),
        (
            "[tool.runnercheck]\nmax_file_size = 0\n",
            "[tool.runnercheck] key 'max_file_size': expected a positive integer (bytes), got 0",
        ),
        (
            '[tool.runnercheck]\nmax_file_size = "1"\n',
            "[tool.runnercheck] key 'max_file_size': expected a positive integer (bytes), got '1'",
        ),
        ("[tool.runnercheck\nx = 1\n", "invalid TOML"),
    ],
)
def test_bad_config_one_line(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[tool.runnercheck]\nbogus = 1\n", "unknown key 'bogus'"),
        ("[tool.runnercheck]\nexclude = 'x'\n", "key 'exclude'"),
        ("[tool.runnercheck\n", "invalid TOML"),
    ],
)
def test_bad_config_cli_exit_2(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, body)
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "config", "--config", str(path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"runnercheck: error: {path}: ")
    assert expected in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_config(config_file=tmp_path / "nope.toml")


def test_config_is_frozen() -> None:
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error
        Config().broadcast_function = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('broadcast_function = ""', "key 'broadcast_function': expected a Python name, got ''"),
        (
            'driver_flag = "\\u0000"',
            "key 'driver_flag': expected a Python name, got '\\x00'",
        ),
        ('execute_method = "execute model"', "key 'execute_method': expected a Python name"),
        (
            'driver_only = ["ModelInput.seq_lens", "noclassdot"]',
            "key 'driver_only[1]': expected 'Class.field', got 'noclassdot'",
        ),
        ('driver_only = ["Input."]', "key 'driver_only[0]': expected 'Class.field'"),
        ("runner_bases = []", "key 'runner_bases': expected at least one class name"),
        ('input_bases = ["a-b"]', "key 'input_bases[0]': expected a Python name, got 'a-b'"),
        ('runner_methods = [""]', "key 'runner_methods[0]': expected a Python name, got ''"),
        ('driver_only_key = " "', "key 'driver_only_key': expected a non-empty string"),
        ('broadcastable_types = ["pkg."]', "key 'broadcastable_types[0]': expected a qualified"),
    ],
)
def test_values_that_would_turn_checking_off_are_errors(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = write(tmp_path, f"[tool.runnercheck]\n{body}\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value) == f"{path}: [tool.runnercheck] {expected}" or str(
        info.value
    ).startswith(f"{path}: [tool.runnercheck] {expected}")


def test_dotted_class_names_and_rule_words_are_accepted(tmp_path: Path) -> None:
    write(
        tmp_path,
        "[tool.runnercheck]\nrunner_bases = ['pkg.Runner']\ndriver_only = ['pkg.Input.seq']\n"
        "select = ['RC1', 'rc205', 'unbroadcast-field', 'MIG101']\nworker_methods = []\n",
    )
    config = load_config(tmp_path)
    assert config.runner_bases == ("pkg.Runner",) and config.worker_methods == ()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "broadcastable_type = ['x.Y']",
            "unknown key 'broadcastable_type'; did you mean 'broadcastable_types'?",
        ),
        ("drivr_flag = 'x'", "unknown key 'drivr_flag'; did you mean 'driver_flag'?"),
        ("zzzz = 1", "unknown key 'zzzz'"),
        (
            "select = ['RC3066']",
            "key 'select': unknown rule 'RC3066'; did you mean 'RC306'? (see `runnercheck rules`)",
        ),
        (
            "ignore = ['recursive-from-dikt']",
            "key 'ignore': unknown rule 'recursive-from-dikt'; did you mean "
            "'recursive-from-dict'? (see `runnercheck rules`)",
        ),
    ],
)
def test_did_you_mean(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, f"[tool.runnercheck]\n{body}\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value) == f"{path}: [tool.runnercheck] {expected}"


def test_the_catalog_knows_every_rule_of_check() -> None:
    from runnercheck.catalog import CODES
    from runnercheck.rules import CHECKS

    for check in CHECKS:
        assert CODES[check.rule.code] == (check.rule.name, "check")


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "{pkg}"],
        ["migrate", "{pkg}"],
        ["migrate", "--check", "{pkg}"],
        ["fuzz", "tests.fuzz.fixtures.good:ModelInput", "--config", "{config}"],
        ["config", "{pkg}"],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith("{")),
)
def test_an_unknown_rule_is_the_same_line_in_every_command(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """(``migrate`` once said "MIG199 internal error UsageError"; the plugin's line is
    tests/mypy_plugin/test_settings.py's.)"""
    from runnercheck.cli import main

    path = write(tmp_path, "[tool.runnercheck]\nselect = ['RC999']\n")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("x = 1\n")
    assert main([a.format(pkg=pkg, config=path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"runnercheck: error: {path}: [tool.runnercheck] key 'select': unknown rule 'RC999'; "
        "did you mean 'RC109'? (see `runnercheck rules`)\n"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            'fuzz_strategies = {"X" = "nope"}',
            "key fuzz_strategies['X']: 'nope' is not 'module:function'",
        ),
        (
            'fuzz_extras = {"x" = "weird"}',
            "key fuzz_extras: extra 'x': unknown type 'weird' (one of tensor, int, float, bool, "
            "str, bytes, or module:attr)",
        ),
    ],
)
def test_fuzz_settings_found_wrong_when_loaded_name_the_file(
    tmp_path: Path, body: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from runnercheck.cli import main

    path = write(tmp_path, f"[tool.runnercheck]\n{body}\n")
    target = tmp_path / "plain_input_for_config.py"
    target.write_text(
        "from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass PlainInput:\n"
        "    n: int = 1\n\n    def as_broadcastable_tensor_dict(self):\n        return {'n': self.n}\n\n"
        "    @classmethod\n    def from_broadcasted_tensor_dict(cls, tensor_dict):\n"
        "        return cls(**tensor_dict)\n"
    )
    assert main(["fuzz", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"runnercheck: error: {path}: [tool.runnercheck] {expected}\n"
    )


VALID_TABLES = [
    {"driver_only": ["ModelInputForGPU.seq_lens"], "exclude": ["tests/*"]},
    {"runner_bases": ("A", "B"), "driver_flag": "is_leader", "max_file_size": 10},
    {"fuzz_strategies": {"Blob": "pkg.mod:blobs"}, "fuzz_extras": {"hidden": "tensor"}},
    {"select": [], "ignore": ["RC103"], "worker_input": "StepInput"},
]


@pytest.mark.parametrize("table", VALID_TABLES)
def test_plain_tables_give_what_pydantic_gives(table: dict[str, object]) -> None:
    from pydantic import TypeAdapter

    from runnercheck.config import _plain_config, config_from_mapping

    plain = _plain_config(table)
    assert plain is not None
    assert plain == TypeAdapter(Config).validate_python(dict(table))
    assert config_from_mapping(table, "pyproject.toml") == plain
    assert isinstance(plain.runner_bases, tuple) and isinstance(plain.exclude, tuple)


@pytest.mark.parametrize(
    "table",
    [{"bogus": 1}, {"exclude": "tests/*"}, {"exclude": [1]}, {"max_file_size": True}],
)
def test_other_tables_go_to_pydantic(table: dict[str, object]) -> None:
    from runnercheck.config import _plain_config

    assert _plain_config(table) is None


def test_check_with_a_configuration_does_not_import_pydantic(tmp_path: Path) -> None:
    write(tmp_path, '[tool.runnercheck]\ndriver_only = ["A.b"]\nexclude = ["tests/*"]\n')
    (tmp_path / "a.py").write_text("x = 1\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runnercheck", "check", "--no-cache", "a.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    modules = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()}
    assert "runnercheck.config" in modules and "tomllib" in modules
    assert "pydantic" not in modules


#: Configuration files nested far beyond any real one: Python's TOML parser recurses
#: once per array or inline table (a traceback ~1000 frames long at ~330 levels) and
#: takes time and memory quadratic in the parts of a dotted key.
DEEP = {
    "arrays": ("[tool.other]\nx = " + "[" * 500 + "]" * 500 + "\n", 2),
    "inline tables": (
        "[tool.runnercheck]\nfuzz_strategies = " + "{a = " * 500 + "'m:f'" + "}" * 500 + "\n",
        2,
    ),
    "arrays in a table array": ("[[tool.x]]\ny = 1\n\n[[tool.x]]\nz = " + "[" * 400, 5),
    "dotted key": ("[tool.other]\n" + ".".join(["a"] * 5_000) + " = 1\n", 2),
    "table header": ("[tool.runnercheck]\n[" + ".".join(["a"] * 5_000) + "]\n", 2),
}


@pytest.mark.parametrize("shape", sorted(DEEP))
@pytest.mark.parametrize("command", ["check", "config"])
def test_deeply_nested_toml_is_one_line_exit_2(tmp_path: Path, shape: str, command: str) -> None:
    body, line = DEEP[shape]
    path = write(tmp_path, body).resolve()
    (tmp_path / "mod.py").write_text("x = 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", command, str(tmp_path / "mod.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == (
        f"runnercheck: error: {path}: TOML nested more than 100 levels deep "
        f"(arrays, inline tables, dotted keys) at line {line}: not read\n"
    )


@pytest.mark.parametrize(
    "body",
    [
        "x = " + "[" * 100 + "]" * 100 + "\n",
        "x = " + "{a = " * 99 + "1" + "}" * 99 + "\n",
        ".".join(["a"] * 100) + " = 1\n",
        "[" + ".".join(["a"] * 99) + "]\nb = 1\n",
        # brackets, braces and dots in strings and comments are not nesting
        "x = '" + "[" * 500 + "'\n" + 'y = "' + "{" * 500 + '\\"[["\n# ' + "[" * 500 + "\n",
        'x = """\n' + "[" * 300 + '\n"""\n' + "y = '''" + "{" * 300 + "'''\n",
        'x = """a""""\n' + "y = [" + "1.5, " * 300 + "]\n" + "z = ''''b''''\n",
        "x = [\n" + "  [1, 2], # ]]]]\n" * 300 + "]\n",
    ],
    ids=[
        "arrays",
        "inline tables",
        "dotted key",
        "header",
        "strings",
        "multi-line",
        "quotes",
        "wide",
    ],
)
def test_toml_nested_up_to_the_bound_is_read(tmp_path: Path, body: str) -> None:
    from runnercheck.tomlfile import load_toml

    path = write(tmp_path, body)
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    assert load_toml(path) == tomllib.loads(body)


def test_the_bound_also_holds_where_the_parser_itself_would_fail(tmp_path: Path) -> None:
    """With the scan's bound lifted past the parser's own depth, its recursion is still
    one line (the scan is the bound; this is the net below it)."""
    from runnercheck.tomlfile import load_toml

    path = write(tmp_path, "x = " + "[" * 5_000 + "]" * 5_000 + "\n")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000)  # as a fresh interpreter has it (a test may raise it)
    try:
        with pytest.raises(ConfigError) as info:
            load_toml(path, max_nesting=10_000)
    finally:
        sys.setrecursionlimit(limit)
    assert str(info.value) == f"{path}: TOML nested too deeply to read: not read"


def test_migrate_s_other_toml_readers_are_bounded_too(tmp_path: Path) -> None:
    """``migrate`` reads the target's line length, formatter and mypy settings from its
    TOML files: a deeply nested one is passed over as an unreadable one is, never a
    traceback."""
    from codemods.framework.typecheck import mypy_config
    from codemods.toolkit.formatting import find_formatter
    from codemods.toolkit.layout import DEFAULT_LIMIT, line_limit

    deep = "x = " + "[" * 500 + "]" * 500 + "\n"
    write(tmp_path, "[tool.mypy]\nstrict = true\n[tool.black]\nline-length = 99\n" + deep)
    assert line_limit(tmp_path) == DEFAULT_LIMIT
    assert find_formatter(tmp_path) is None
    assert mypy_config(tmp_path) is None
    (tmp_path / "ruff.toml").write_text("line-length = 99\n" + deep)
    assert line_limit(tmp_path) == DEFAULT_LIMIT


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
@pytest.mark.parametrize("command", ["check", "config"])
def test_a_config_that_is_not_a_regular_file_is_one_line(
    tmp_path: Path, kind: str, command: str
) -> None:
    (tmp_path / "mod.py").write_text("x = 1\n")
    if kind == "fifo":
        path = tmp_path / "fifo.toml"
        os.mkfifo(path)
        what = "a FIFO"
    elif kind == "device":
        path = Path("/dev/zero")
        what = "a character device"
    else:
        path = tmp_path / "dir.toml"
        path.mkdir()
        what = "a directory"
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", command, "--config", str(path), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr == f"runnercheck: error: {path}: not a regular file ({what})\n"


def test_a_config_larger_than_the_bound_is_one_line(tmp_path: Path) -> None:
    from runnercheck.tomlfile import load_toml

    path = write(tmp_path, "# " + "x" * 100 + "\n")
    with pytest.raises(ConfigError) as info:
        load_toml(path, max_size=50)
    assert str(info.value) == f"{path}: more than 50 bytes: not read as a configuration file"


def test_an_absurd_exclude_list_is_one_line() -> None:
    from runnercheck.config import config_from_mapping
    from runnercheck.excludes import MAX_EXCLUDE_PATTERNS

    assert MAX_EXCLUDE_PATTERNS == 1_000_000
    many = [f"d{i}/*" for i in range(MAX_EXCLUDE_PATTERNS)]
    assert len(config_from_mapping({"exclude": many}, "p.toml").exclude) == len(many)
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"exclude": [*many, "x"]}, "p.toml")
    assert str(info.value) == (
        "p.toml: [tool.runnercheck] key 'exclude': 1000001 patterns, more than "
        "runnercheck takes (1000000)"
    )
