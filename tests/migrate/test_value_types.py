"""A generated input field takes the type of the value the driver assigns, not a
stale annotation: the ``gpu_only`` engine variant with its ``ModelInput`` NamedTuple
annotating ``input_tokens`` as ``List[int]`` (and the legacy method's return type
saying so too) while ``_prepare_model_input`` builds it with ``torch.tensor``."""

from __future__ import annotations

from pathlib import Path

from codemods.framework.pipeline import MERGE, migrate
from tests.migrate import variants

STALE = "class ModelInput(NamedTuple):\n    input_tokens: torch.Tensor\n"
RETURNS = "    ) -> Tuple[\n        torch.Tensor,\n        torch.Tensor,\n"


def _stale_tree() -> variants.Tree:
    tree = variants.before("gpu_only")
    runner = tree["model_runner.py"]
    assert runner.count(STALE) == 1 and runner.count(RETURNS) == 1
    runner = runner.replace(STALE, STALE.replace("torch.Tensor", "List[int]"))
    tree["model_runner.py"] = runner.replace(
        RETURNS, "    ) -> Tuple[\n        List[int],\n        torch.Tensor,\n"
    )
    return tree


def test_a_field_takes_the_type_of_the_value_assigned(tmp_path: Path) -> None:
    root = variants.write(_stale_tree(), tmp_path / "engine")
    result = migrate([root], select=(MERGE,))
    assert not result.refusals, result.refusals
    new = result.changes[root / "model_runner.py"].new.decode()
    body = new[new.index("class ModelRunnerInput(") :]
    assert "    input_tokens: torch.Tensor\n" in body.split("def ")[0]
    notes = [text for g in result.groups for r in g.runners for _p, _l, text in r.notes]
    retyped = [n for n in notes if n.startswith("ModelRunnerInput.input_tokens is")]
    assert len(retyped) == 1, notes
    assert "`List[int]`" in retyped[0] and "`torch.Tensor`" in retyped[0]


def test_agreeing_annotations_give_no_note(tmp_path: Path) -> None:
    root = variants.write(variants.before("gpu_only"), tmp_path / "engine")
    result = migrate([root], select=(MERGE,))
    notes = [text for g in result.groups for r in g.runners for _p, _l, text in r.notes]
    assert not [n for n in notes if "the value the driver assigns" in n], notes
