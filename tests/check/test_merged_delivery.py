"""RC103 counts a field as broadcast when the merged dict delivers it, also to a base
class that the receiving ranks only build through a subclass."""

from __future__ import annotations

from runnercheck.check import check_sources

SOURCE = """\
import dataclasses
from typing import Any, Dict, Optional

from engine.distributed import broadcast_tensor_dict


@dataclasses.dataclass(frozen=True)
class WorkerInput:
    num_seq_groups: Optional[int] = None
    virtual_engine: int = 0

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "WorkerInput":
        return cls(
            num_seq_groups=tensor_dict.pop("num_seq_groups"),
            virtual_engine={read},
        )

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"num_seq_groups": self.num_seq_groups, "virtual_engine": self.virtual_engine}}


@dataclasses.dataclass(frozen=True)
class ModelInputForAccel:
    input_tokens: Optional[Any] = None
    virtual_engine: Optional[int] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"input_tokens": self.input_tokens}}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "ModelInputForAccel":
        return cls(**tensor_dict)


@dataclasses.dataclass(frozen=True)
class ModelInputForAccelWithSampling(ModelInputForAccel):
    sampling: Optional[Any] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"input_tokens": self.input_tokens, "sampling": self.sampling}}

    @classmethod
    def from_broadcasted_tensor_dict(
        cls, tensor_dict: Dict[str, Any]
    ) -> "ModelInputForAccelWithSampling":
        return cls(**tensor_dict)


class AccelModelRunner(ModelRunnerBase[ModelInputForAccelWithSampling]):
    def prepare_model_input(self, seqs: Any) -> ModelInputForAccelWithSampling:
        return ModelInputForAccelWithSampling()

    def make_model_input_from_broadcasted_tensor_dict(
        self, d: Dict[str, Any]
    ) -> ModelInputForAccelWithSampling:
        return ModelInputForAccelWithSampling.from_broadcasted_tensor_dict(d)

    def execute_model(self, model_input: ModelInputForAccelWithSampling, kv: Any) -> Any:
        return self.model(model_input.input_tokens, model_input.virtual_engine)


class AccelWorker:
    def __init__(self, is_driver_worker: bool) -> None:
        self.is_driver_worker = is_driver_worker
        self.model_runner = AccelModelRunner()

    def prepare_worker_input(self, req: Any) -> WorkerInput:
        return WorkerInput(num_seq_groups=len(req.seqs))

    def execute_model(self, execute_model_req: Any = None) -> Any:
        if self.is_driver_worker:
            worker_input = self.prepare_worker_input(execute_model_req)
            model_input = self.model_runner.prepare_model_input(execute_model_req.seqs)
            broadcast_data = worker_input.as_broadcastable_tensor_dict()
            broadcast_data.update(model_input.as_broadcastable_tensor_dict())
            broadcast_tensor_dict(broadcast_data, src=0)
        else:
            broadcast_data = broadcast_tensor_dict(src=0)
            worker_input = WorkerInput.from_broadcasted_tensor_dict(broadcast_data)
            model_input = self.model_runner.make_model_input_from_broadcasted_tensor_dict(
                broadcast_data
            )
        return self.model_runner.execute_model(model_input, None)
"""


def rc103(read: str) -> list[str]:
    result = check_sources({"accel.py": SOURCE.format(read=read)})
    return [f.message for f in [*result.findings, *result.notes] if f.code == "RC103"]


def test_a_base_field_the_worker_key_delivers_to_the_built_subclass_is_broadcast() -> None:
    # WorkerInput reads virtual_engine without pop: the key reaches the subclass's
    # cls(**d), which inherits the base's field, so every rank sees the driver's value
    assert rc103('tensor_dict["virtual_engine"]') == []


def test_the_same_field_is_an_error_once_the_worker_input_pops_the_key() -> None:
    messages = rc103('tensor_dict.pop("virtual_engine")')
    assert len(messages) == 1
    assert "field 'virtual_engine' of ModelInputForAccel is not broadcast" in messages[0]
