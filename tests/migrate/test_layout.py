"""The lines migrate writes keep to the target's line length; lines it did not write
are left as they were."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from codemods.toolkit.layout import DEFAULT_LIMIT, line_limit, wrap_long_statements


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


NESTED = '''"""A module."""
import os  # a comment


@decorator(with_a_rather_long_argument_list, and_another_one)
class Runner(Base):
    """Doc."""

    def prepare(self, seq_group_metadata_list, virtual_engine=0, finished_requests_ids=None):
        # a comment line that is long enough to be longer than the limit here
        if self.is_driver_worker and seq_group_metadata_list is not None and virtual_engine:
            tensor_dict = dict(input_tokens=input_tokens, input_positions=input_positions)
        elif virtual_engine and finished_requests_ids and seq_group_metadata_list:
            pass
        else:
            while self.keep_going and seq_group_metadata_list and finished_requests_ids:
                value = self.model_runner.prepare_model_input(seq_group_metadata_list, 0)
        try:
            with open(os.path.join("a", "b")) as handle:
                data = handle.read(); other = compute_something_long(data, data, data, data)
        except (ValueError, KeyError) as exc:
            raise RuntimeError(f"cannot prepare the input of {seq_group_metadata_list}") from exc
        finally:
            self.cleanup_everything_that_was_allocated(seq_group_metadata_list, virtual_engine)
        for index in range(10):
            result = self.combine(index, seq_group_metadata_list, finished_requests_ids)
        else:
            short = 1
        if x: y = make_metadata(num_prefills, slot_mapping, num_decode_tokens, block_tables)
        return broadcast_tensor_dict(tensor_dict, src=0, group=self.group, async_op=False)


def helper(a, b):
    return make_metadata(num_prefills, slot_mapping, num_decode_tokens, block_tables)
'''


def test_long_statements_are_found_where_position_metadata_finds_them() -> None:
    """The statements found from the text, block by block, are those LibCST's position
    metadata puts on the long lines (the walk it replaces), at every depth."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from codemods.toolkit.layout import _LongStatements
    from codemods.toolkit.positions import measure_sizes

    module = cst.parse_module(NESTED)
    lines = module.code.splitlines()
    for limit in (40, 60, 80, 88):
        long = {n for n, line in enumerate(lines, 1) if len(line) > limit}
        finder = _LongStatements(measure_sizes(module), lines, long, limit)
        finder.container(module, 1)
        expected: set[int] = set()
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node, where in positions.items():
            if isinstance(node, (cst.If, cst.While)) and where.start.line in long:
                expected.add(id(node))
            elif isinstance(node, cst.SimpleStatementLine) and any(
                n in long for n in range(where.start.line, where.end.line + 1)
            ):
                expected.add(id(node))
        assert finder.targets == expected, limit
        assert len(expected) >= 5


#: Blocks indented by tabs and by two spaces, an ``elif`` and a ``while`` too long, CRLF.
ODD_BLOCKS = (
    "class Runner:\r\n"
    "\tdef step(self, seq_group_metadata_list, finished_requests_ids, virtual_engine):\r\n"
    "\t\tif seq_group_metadata_list and finished_requests_ids and virtual_engine > 1:\r\n"
    "\t\t\tresult = self.combine(seq_group_metadata_list, finished_requests_ids, 1)\r\n"
    "\t\telif virtual_engine and finished_requests_ids and seq_group_metadata_list:\r\n"
    "\t\t\tpass\r\n"
    "\t\twhile seq_group_metadata_list and finished_requests_ids and virtual_engine:\r\n"
    "\t\t\tbreak\r\n"
    "def helper(a, b):\r\n"
    "  if a:\r\n"
    "    return make_metadata(num_prefills, slot_mapping, num_decode_tokens, block_tables)\r\n"
)


@pytest.mark.parametrize("text", [NESTED, ODD_BLOCKS, NESTED.rstrip("\n")])
def test_the_wrapped_code_is_the_print_of_the_wrapped_module(text: str) -> None:
    """The wrapped module's code is spliced from the print that found the long lines
    (not printed again): it is exactly what LibCST prints for it."""
    from codemods.toolkit import cstutil

    spliced = 0
    for limit in (30, 40, 60, 80, 88):
        module = cst.parse_module(text)
        wrapped = wrap_long_statements(module, "", limit)
        if wrapped is module:
            continue
        assert cstutil.module_code(wrapped) == wrapped.code, limit
        spliced += id(wrapped) in cstutil._TEXTS
    if text.endswith("\n") and "elif" not in text:
        assert spliced >= 3
