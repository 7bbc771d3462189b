"""Every way of declaring a field driver-only is honoured identically by ``check``
(RC103) and by ``migrate`` (the ``driver-only`` codemod, and the group planner through
the same analysis): declared, nothing is reported and nothing is rewritten; left
undeclared, ``check`` reports exactly that field and ``migrate`` marks exactly it."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.framework.pipeline import migrate
from runnercheck.check import check_paths
from runnercheck.config import Config

INPUT = """\
import dataclasses
from dataclasses import dataclass, field
from typing import List, Optional

{imports}
{constant}

@dataclass(frozen=True)
class ModelInput:
    input_tokens: List[int]
    seq_lens: Optional[List[int]] = {value}

    def as_broadcastable_tensor_dict(self):
        return {{"input_tokens": self.input_tokens}}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls(**tensor_dict)
"""
MARKERS = 'DRIVER_ONLY = {"runnercheck": "driver-only"}\n'

#: form -> (imports, module-level constant, the field's value, config driver_only)
FORMS: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "neutral-dict": ("", "", 'field(default=None, metadata={"driver_only": True})', ()),
    "neutral-dict-call": ("", "", "field(default=None, metadata=dict(driver_only=True))", ()),
    "configured-key": ("", "", 'field(default=None, metadata={"not_broadcast": True})', ()),
    "inline-dict": ("", "", 'field(default=None, metadata={"runnercheck": "driver-only"})', ()),
    "dict-call": ("", "", 'field(default=None, metadata=dict(runnercheck="driver-only"))', ()),
    "module-constant": ("", MARKERS, "field(default=None, metadata=DRIVER_ONLY)", ()),
    "imported-constant": (
        "from markers import DRIVER_ONLY",
        "",
        "field(default=None, metadata=DRIVER_ONLY)",
        (),
    ),
    "imported-module": (
        "import markers",
        "",
        "dataclasses.field(default=None, metadata=markers.DRIVER_ONLY)",
        (),
    ),
    "config-list": ("", "", "None", ("ModelInput.seq_lens",)),
    # as vLLM (and migrate's own input classes) do it: no marker, a comment above
    "comment": ("", "", "None", ()),
}
#: the comment the "comment" form puts above the field
COMMENT = "    # Driver-only: not broadcast; the other ranks get None.\n"


def make_tree(root: Path, form: str | None, key: str = "") -> tuple[Path, Config]:
    imports, constant, value, config_list = FORMS[form] if form else ("", "", "None", ())
    root.mkdir()
    (root / "markers.py").write_text(MARKERS)
    text = INPUT.format(imports=imports, constant=constant, value=value)
    if form == "comment":
        text = text.replace("    seq_lens:", COMMENT + "    seq_lens:")
    (root / "model_input.py").write_text(text)
    if form == "configured-key":
        key = "not_broadcast"
    config = Config(driver_only=config_list, **({"driver_only_key": key} if key else {}))
    return root / "model_input.py", config


def rc103(root: Path, config: Config) -> list[str]:
    """The fields RC103 reports, as errors or notes (no runner reads them here)."""
    result = check_paths([root], config=config)
    found = [*result.findings, *result.notes]
    return [f.message.split("'")[1] for f in found if f.code == "RC103"]


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_declared_field_is_left_alone_by_check_and_migrate(tmp_path: Path, form: str) -> None:
    path, config = make_tree(tmp_path / "tree", form)
    assert rc103(path.parent, config) == []
    result = migrate([path.parent], config=config)
    assert result.changes == {}
    assert result.refusals == []


def test_an_undeclared_field_is_reported_and_marked(tmp_path: Path) -> None:
    path, config = make_tree(tmp_path / "tree", None)
    assert rc103(path.parent, config) == ["seq_lens"]
    result = migrate([path.parent], config=config)
    assert list(result.changes) == [path]
    change = result.changes[path]
    assert change.codemods == ("driver-only",)
    new = change.new.decode()
    # vLLM's own form: a comment above the field, which is otherwise unchanged; no
    # marker that only a tool reads, no tool name
    assert (
        "    # Driver-only: never broadcast; the other ranks hold its default.\n"
        "    seq_lens: Optional[List[int]] = None\n"
    ) in new
    assert "metadata" not in new and "runnercheck" not in new
    assert (
        new.replace("    # Driver-only: never broadcast; the other ranks hold its default.\n", "")
        == path.read_text()
    )
    # the marked tree is clean for both tools
    path.write_bytes(change.new)
    assert rc103(path.parent, config) == []
    assert migrate([path.parent], config=config).changes == {}


def test_the_comment_declares_the_field_whatever_key_is_configured(tmp_path: Path) -> None:
    path, config = make_tree(tmp_path / "tree", None, key="not_broadcast")
    result = migrate([path.parent], config=config)
    path.write_bytes(result.changes[path].new)
    assert rc103(path.parent, config) == []
    assert rc103(path.parent, Config()) == []


def test_a_comment_that_does_not_say_driver_only_declares_nothing(tmp_path: Path) -> None:
    path, config = make_tree(tmp_path / "tree", "comment")
    text = path.read_text()
    path.write_text(text.replace(COMMENT, "    # Not broadcast; the other ranks get None.\n"))
    assert rc103(path.parent, config) == ["seq_lens"]
    # nor does one separated from the field by a statement
    path.write_text(text.replace(COMMENT, COMMENT + "    other: int = 0\n"))
    assert rc103(path.parent, config) == ["seq_lens"]
