"""[tool.runnercheck]: defaults, overrides and one-line errors with exit 2."""

from __future__ import annotations

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
