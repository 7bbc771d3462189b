"""Errors break something at run time; notes do not, and say why. Only errors fail a run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from runnercheck.check import check_sources
from tests.check.conftest import CliResult

INPUT = """\
import dataclasses
from typing import Any, Dict, List, Optional


@dataclasses.dataclass(frozen=True)
class ModelInputForNeuron:
    input_tokens: Optional[Any] = None
    seq_lens: Optional[List[int]] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"input_tokens": self.input_tokens}}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "ModelInputForNeuron":
        return cls.from_broadcasted_tensor_dict(tensor_dict)


class NeuronModelRunner(ModelRunnerBase[ModelInputForNeuron]):
    def prepare_model_input(self, seqs: Any) -> ModelInputForNeuron:
        return ModelInputForNeuron()

    def make_model_input_from_broadcasted_tensor_dict(self, d: Dict[str, Any]) -> Any:
        return ModelInputForNeuron.from_broadcasted_tensor_dict(d)

    def execute_model(self, model_input: ModelInputForNeuron, kv_caches: Any) -> Any:
        if not self.is_driver_worker:
            return []
        return self.model(model_input.input_tokens, model_input.seq_lens)


class NeuronWorker(LocalOrDistributedWorkerBase):
    def __init__(self) -> None:
        self.model_runner = NeuronModelRunner()

    @property
    def do_metadata_broadcast(self) -> bool:
        return {broadcasts}

    def prepare_worker_input(self, req: Any) -> Any:
        return req

    def execute_worker(self, worker_input: Any) -> None:
        pass
"""


def findings(broadcasts: bool) -> tuple[list[str], list[str]]:
    result = check_sources({"neuron.py": INPUT.format(broadcasts=broadcasts)})
    return [f.code for f in result.findings], [f.message for f in result.notes]


def test_a_worker_that_never_broadcasts_makes_its_inputs_bugs_notes() -> None:
    errors, notes = findings(broadcasts=False)
    assert errors == []
    assert any(
        "infinite recursion" in n
        and "only NeuronWorker rebuilds it, and its do_metadata_broadcast is always False" in n
        for n in notes
    )


def test_the_same_code_under_a_worker_that_broadcasts_is_an_error() -> None:
    errors, notes = findings(broadcasts=True)
    assert errors == ["RC101"]
    # seq_lens is read after the driver-only return: never on a non-driver rank
    assert any("'seq_lens'" in n and "reads the field in execute_model" in n for n in notes)


def test_a_worker_base_by_name_alone_requires_only_the_step_base_methods() -> None:
    source = (
        "class NeuronWorker(WorkerBase):\n    def execute_model(self, req):\n        return req\n"
    )
    assert check_sources({"w.py": source}).findings == []
    stepped = source.replace("(WorkerBase)", "(LocalOrDistributedWorkerBase)")
    codes = {f.code for f in check_sources({"w.py": stepped}).findings}
    assert codes == {"RC107"}


def test_notes_exit_0_and_show_with_show_notes(
    run: Callable[..., CliResult], tmp_path: Path
) -> None:
    path = tmp_path / "neuron.py"
    path.write_text(INPUT.format(broadcasts=False))
    quiet = run(str(path))
    assert quiet.code == 0
    assert quiet.finding_lines == []
    assert quiet.summary.endswith("notes (--show-notes)).")
    shown = run("--show-notes", str(path))
    assert shown.code == 0
    assert shown.finding_lines and all(": note: RC" in line for line in shown.finding_lines)
    sarif = json.loads(run("--format", "sarif", str(path)).out)
    levels = {r["level"] for r in sarif["runs"][0]["results"]}
    assert levels == {"note"}
