"""fuzz reads a ``# Driver-only: ...`` comment above a field as ``check`` does (the way
migrate and vLLM declare a field the broadcast dict leaves out): such a field is not
compared on the other ranks; any other field is."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from runnercheck.config import Config
from runnercheck.fuzz.search import driver_only_rule

SOURCE = """\
import dataclasses
from typing import List, Optional


@dataclasses.dataclass(frozen=True)
class Base:
    input_tokens: List[int]
    # Driver-only: not broadcast; the other ranks get None.
    seq_lens: Optional[List[int]] = None


@dataclasses.dataclass(frozen=True)
class Child(Base):
    # Not broadcast either, but not declared so.
    query_lens: Optional[List[int]] = None
"""


def _load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    path = tmp_path / "commented_inputs.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("commented_inputs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "commented_inputs", module)
    spec.loader.exec_module(module)
    return module


def test_a_commented_field_is_driver_only_in_its_class_and_subclasses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = _load(tmp_path, monkeypatch)
    rule = driver_only_rule(Config())
    for cls in (module.Base, module.Child):
        declared = {f.name for f in dataclasses.fields(cls) if rule(cls, f)}
        assert declared == {"seq_lens"}, cls
