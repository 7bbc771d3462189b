"""The lines migrate writes keep to the target's line length; lines it did not write
are left as they were."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from codemods.layout import DEFAULT_LIMIT, line_limit, wrap_long_statements


def relaid(original: str, written: str, limit: int = 40) -> str:
    return wrap_long_statements(cst.parse_module(written), original, limit).code


def test_a_long_assignment_without_arguments_is_parenthesised() -> None:
    written = "def f(self):\n    metadata_dict = self.decode_metadata.asdict_zerocopy()\n"
    assert relaid("", written, limit=50) == (
        "def f(self):\n"
        "    metadata_dict = (\n"
        "        self.decode_metadata.asdict_zerocopy()\n"
        "    )\n"
    )


def test_a_long_call_gets_its_arguments_on_their_own_line() -> None:
    written = "x = make_metadata(num_prefills, slot_mapping)\n"
    assert relaid("", written) == "x = make_metadata(\n    num_prefills, slot_mapping\n)\n"


def test_a_long_if_header_breaks_before_each_operator() -> None:
    written = (
        "def f(self, model_input):\n"
        "    if self.vision_config and model_input.kwargs is not None:\n"
        "        pass\n"
    )
    assert relaid("", written, limit=50) == (
        "def f(self, model_input):\n"
        "    if (\n"
        "        self.vision_config\n"
        "        and model_input.kwargs is not None\n"
        "    ):\n"
        "        pass\n"
    )


def test_lines_of_the_original_file_are_left_as_they_were() -> None:
    text = (
        "def f(self, model_input):\n"
        "    if self.vision_config and model_input.kwargs is not None:\n"
        "        metadata_dict = self.decode_metadata.asdict_zerocopy()\n"
    )
    assert relaid(text, text) == text


@pytest.mark.parametrize(
    ("name", "text", "limit"),
    [
        ("pyproject.toml", "[tool.ruff]\nline-length = 88\n", 88),
        ("ruff.toml", "line-length = 100\n", 100),
        ("setup.cfg", "[flake8]\nmax-line-length = 79\n", 79),
        (".style.yapf", "[style]\ncolumn_limit = 90\n", 90),
    ],
)
def test_the_limit_comes_from_the_nearest_configuration(
    tmp_path: Path, name: str, text: str, limit: int
) -> None:
    (tmp_path / name).write_text(text)
    package = tmp_path / "pkg" / "worker"
    package.mkdir(parents=True)
    assert line_limit(package / "worker.py") == limit


def test_no_configuration_means_eighty_columns(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    assert DEFAULT_LIMIT == 80
    assert line_limit(tmp_path / "pkg" / "worker.py") == 80
