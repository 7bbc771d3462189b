"""The receiver's statements move into the generated input's
``from_broadcasted_tensor_dict``: the non-driver branch, written there only, keeps the
statements it does not change (no copy is made of them); the prologue, which
``prepare_model_input`` keeps as well, is written there as a copy of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import libcst as cst
import pytest

from codemods.framework.pipeline import migrate
from codemods.merge_broadcasts import runner_rewrite
from codemods.toolkit import cstutil
from tests.migrate.conftest import FIXTURES, copy_tree


def test_the_moved_statements_are_kept_or_copied_as_they_must_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    runner = work / "model_runner.py"
    split = '        """Prepare the inputs on the driver and share them with the other ranks."""\n'
    text = runner.read_text()
    assert split in text
    runner.write_text(text.replace(split, split + "        step = 0\n        scale = 1.0\n"))
    filled: list[tuple[Any, cst.FunctionDef]] = []
    real = runner_rewrite._fill_from_dict

    def recording(plan: Any, method: cst.FunctionDef) -> cst.FunctionDef:
        filled.append((plan, real(plan, method)))
        return filled[-1][1]

    monkeypatch.setattr(runner_rewrite, "_fill_from_dict", recording)
    result = migrate([work])
    assert not result.refusals and result.changes
    plan, method = next((p, m) for p, m in filled if p.name == "ModelRunner")
    written = {id(s) for s in cstutil.body_of(method.body)}
    assert [cstutil.code(s).strip() for s in plan.prologue] == ["step = 0", "scale = 1.0"]
    assert not written & {id(s) for s in plan.prologue}  # a copy of its own
    assert [cstutil.code(s).strip() for s in cstutil.body_of(method.body)][1:3] == [
        "step = 0",
        "scale = 1.0",
    ]
    untouched = [
        s
        for s in plan.non_driver
        if not any(s is skip for skip in plan.from_dict_skip)
        and plan.receive_var not in cstutil.loaded(s)
        and "attn_backend" not in cstutil.code(s)
    ]
    assert untouched and all(id(s) in written for s in untouched)  # the same statements
    code = cstutil.code(method)
    assert "self.attn_backend" not in code and "attn_backend.make_metadata(" in code
    written_code = b"".join(c.new for c in result.changes.values() if c.new is not None)
    assert b"attn_backend.make_metadata(**tensor_dict)" in written_code
