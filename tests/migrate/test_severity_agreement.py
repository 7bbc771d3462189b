"""RC106 and RC110 ask the codemods' own questions: each is an error exactly where
``runnercheck migrate`` removes that broadcast on that code, and a note naming the
refusal where it leaves it, so that a tree ``migrate`` has been run on passes ``check``."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.framework.pipeline import migrate
from runnercheck.check import check_paths
from tests.check import built
from tests.check.conftest import FIXTURES

MERGE = FIXTURES / "semantics" / "merge-refused"


@pytest.mark.parametrize("side", ["true", "false"])
def test_rc106_is_an_error_exactly_where_the_merge_applies(tmp_path: Path, side: str) -> None:
    (tmp_path / "worker.py").write_text(built.text(MERGE / f"{side}.py"))
    result = migrate([tmp_path], select=("merge-broadcasts",))
    checked = check_paths([tmp_path])
    rc106 = [f for f in checked.findings if f.code == "RC106"]
    notes = [f for f in checked.notes if f.code == "RC106"]
    if side == "true":  # merged: one broadcast per step, and check said it would be
        assert result.refusals == []
        assert tmp_path / "worker.py" in result.changes
        assert len(rc106) == 1 and notes == []
        assert rc106[0].message.endswith("merge them into one broadcast: run `runnercheck migrate`")
        return
    assert result.changes == {}
    assert [r.code for r in result.refusals] == ["MIG101"]
    assert rc106 == [] and len(notes) == 1
    assert f"`runnercheck migrate` refuses it, MIG101: {result.refusals[0].message}" in (
        notes[0].message
    )
