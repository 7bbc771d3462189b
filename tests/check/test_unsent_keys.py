"""RC111 on the merged dict and the reads it counts: a key another part leaves in the
merged dict is sent; a read under a test that names the key, in a ``try`` or with a
default is no read that can fail."""

from __future__ import annotations

import pytest

from runnercheck.analysis.extract import extract_source
from runnercheck.check import check_sources

MERGED = """\
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
            virtual_engine={worker_read},
        )

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"num_seq_groups": self.num_seq_groups, "virtual_engine": self.virtual_engine}}


@dataclasses.dataclass(frozen=True)
class ModelInputForAccel:
    input_tokens: Optional[Any] = None
    virtual_engine: int = 0

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {{"input_tokens": self.input_tokens}}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "ModelInputForAccel":
        return cls(
            input_tokens=tensor_dict.pop("input_tokens"),
            virtual_engine=tensor_dict.pop("virtual_engine"),
        )


class AccelModelRunner(ModelRunnerBase[ModelInputForAccel]):
    def prepare_model_input(self, seqs: Any) -> ModelInputForAccel:
        return ModelInputForAccel()

    def make_model_input_from_broadcasted_tensor_dict(self, d: Dict[str, Any]) -> ModelInputForAccel:
        return ModelInputForAccel.from_broadcasted_tensor_dict(d)

    def execute_model(self, model_input: ModelInputForAccel, kv: Any) -> Any:
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


def rc111(source: str) -> list[str]:
    result = check_sources({"accel.py": source})
    return [
        f"{f.line}: {f.message}" for f in [*result.findings, *result.notes] if f.code == "RC111"
    ]


def test_a_key_the_worker_input_leaves_in_the_merged_dict_is_sent_to_the_model_input() -> None:
    # WorkerInput reads virtual_engine without pop: it is still in the dict when the
    # model input pops it, on every non-driver rank
    assert rc111(MERGED.format(worker_read='tensor_dict["virtual_engine"]')) == []


def test_the_same_read_fails_once_the_worker_input_pops_the_key() -> None:
    source = MERGED.format(worker_read='tensor_dict.pop("virtual_engine")')
    lines = source.splitlines()
    read = 1 + lines.index('            virtual_engine=tensor_dict.pop("virtual_engine"),', 20)
    assert rc111(source) == [
        f"{read}: ModelInputForAccel.from_broadcasted_tensor_dict reads key 'virtual_engine' "
        "with no default, but no path of ModelInputForAccel.as_broadcastable_tensor_dict "
        "puts it: KeyError on every non-driver rank"
    ]


READS = """\
class Input:
    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        {body}
        return cls(**tensor_dict)
"""


@pytest.mark.parametrize(
    ("body", "required"),
    [
        ('x = tensor_dict["k"]', {"k"}),
        ('x = tensor_dict.pop("k")', {"k"}),
        ('del tensor_dict["k"]', {"k"}),
        ('x = tensor_dict.pop("k", None)', set()),
        ('x = tensor_dict.get("k")', set()),
        ('x = tensor_dict["k"] if "k" in tensor_dict else None', set()),
        ('x = "k" in tensor_dict and tensor_dict["k"]', set()),
        ('if "k" in tensor_dict:\n            x = tensor_dict.pop("k")', set()),
        (
            'if "k" not in tensor_dict:\n            return None\n        x = tensor_dict["k"]',
            set(),
        ),
        (
            'try:\n            x = tensor_dict["k"]\n        except KeyError:\n            x = None',
            set(),
        ),
        # a test about another key guards nothing
        ('if "j" in tensor_dict:\n            x = tensor_dict["k"]', {"k"}),
    ],
)
def test_reads_with_no_default_and_no_guard(body: str, required: set[str]) -> None:
    facts = extract_source(READS.format(body=body), "input.py")
    method = facts.classes["Input"].methods["from_broadcasted_tensor_dict"]
    received = next(d for d in method.dicts.values() if d.param_index == 1)
    assert set(received.required) == required


CHAIN = """\
class Base:
    def as_broadcastable_tensor_dict(self):
        return {{"input_tokens": self.input_tokens}}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls._build(tensor_dict)

    @classmethod
    def _build(cls, tensor_dict):
        return cls(input_tokens=tensor_dict.pop("input_tokens"), **tensor_dict)


class Child(Base):
    def as_broadcastable_tensor_dict(self):
        {child_dict}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        tensor_dict["extra"] = tensor_dict.pop("sampling")
        return super().from_broadcasted_tensor_dict(tensor_dict, attn_backend)
"""


def test_the_super_chain_and_class_helpers_on_both_sides() -> None:
    sent = 'return {**super().as_broadcastable_tensor_dict(), "sampling": self.sampling}'
    assert rc111(CHAIN.format(child_dict=sent)) == []
    found = rc111(CHAIN.format(child_dict='return {"sampling": self.sampling}'))
    assert found == [
        "11: Child.from_broadcasted_tensor_dict reads key 'input_tokens' with no default "
        "(in Base._build), but no path of Child.as_broadcastable_tensor_dict puts it: "
        "KeyError on every non-driver rank"
    ]
