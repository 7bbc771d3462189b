"""RC109 lists only the targets a broadcasting worker rebuilds: a runner under a worker
whose do_metadata_broadcast is always False never receives the merged dict."""

from __future__ import annotations

from pathlib import Path

from runnercheck.check import check_sources

BAD = Path(__file__).parent / "fixtures" / "merged-dict-leak" / "bad"

SILENT = """

@dataclasses.dataclass(frozen=True)
class TPUModelInput:
    input_tokens: Optional[Any] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {"input_tokens": self.input_tokens}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "TPUModelInput":
        return cls(**tensor_dict)


class TPUModelRunner:
    def make_model_input_from_broadcasted_tensor_dict(self, d: Dict[str, Any]) -> TPUModelInput:
        return TPUModelInput.from_broadcasted_tensor_dict(d)

    def execute_model(self, model_input: TPUModelInput, kv_caches: Any, **kw: Any) -> Any:
        return model_input.input_tokens


class TPUWorker(LocalOrDistributedWorkerBase):
    def __init__(self, is_driver_worker: bool) -> None:
        self.is_driver_worker = is_driver_worker
        self.model_runner = TPUModelRunner()

    @property
    def do_metadata_broadcast(self) -> bool:
        return {broadcasts}
"""


def rc109(broadcasts: bool) -> list[str]:
    runners = (BAD / "runners.py").read_text() + SILENT.replace("{broadcasts}", str(broadcasts))
    result = check_sources(
        {
            "engine/worker_base.py": (BAD / "worker_base.py").read_text(),
            "engine/runners.py": runners,
        }
    )
    return [f.message for f in result.findings if f.code == "RC109"]


def test_a_target_under_a_worker_that_never_broadcasts_is_not_listed() -> None:
    messages = rc109(broadcasts=False)
    assert len(messages) == 2
    assert all("TPUModelInput" not in m for m in messages)
    assert any("`CPUModelInput(**...)` at runners.py:18 does not accept it" in m for m in messages)


def test_the_same_target_under_a_broadcasting_worker_is_listed() -> None:
    messages = rc109(broadcasts=True)
    assert len(messages) == 2
    assert all("`TPUModelInput(**...)`" in m for m in messages)
