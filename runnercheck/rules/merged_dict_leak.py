"""RC109 merged-dict-leak: a key of the merged broadcast reaches another part's ``**`` call
that does not accept it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Leak, Project
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from dataclasses import dataclass

from vllm.distributed import broadcast_tensor_dict


@dataclass(frozen=True)
class WorkerInput:
    num_seq_groups: int = 0
    virtual_engine: int = 0

    def as_broadcastable_tensor_dict(self):
        return {
            "num_seq_groups": self.num_seq_groups,
            "virtual_engine": self.virtual_engine,
        }

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(
            num_seq_groups=tensor_dict.pop("num_seq_groups"),
            virtual_engine=tensor_dict["virtual_engine"],
        )


@dataclass(frozen=True)
class CPUModelInput:
    input_tokens: list

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(**tensor_dict)


class CPUModelRunner:
    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        return CPUModelInput.from_broadcasted_tensor_dict(tensor_dict)

    def execute_model(self, model_input, kv_caches):
        return model_input.input_tokens


class CPUWorker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker
        self.model_runner = CPUModelRunner()

    def execute_model(self, execute_model_req=None):
        if self.is_driver_worker:
            worker_input = self.prepare_worker_input(execute_model_req)
            model_input = self.model_runner.prepare_model_input(execute_model_req)
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
_GOOD = _variant(
    _BAD,
    (
        '            virtual_engine=tensor_dict["virtual_engine"],\n',
        '            virtual_engine=tensor_dict.pop("virtual_engine"),\n',
    ),
)

RULE = Rule(
    code="RC109",
    name="merged-dict-leak",
    tool="check",
    summary="A key of the merged broadcast dict reaches another part's `cls(**tensor_dict)`, "
    "which does not accept it.",
    why="With one broadcast per step, every part must take its own keys out of the shared dict "
    "(`pop`) before the next part rebuilds itself from the rest. A key read without `pop`, or an "
    "extra extracted after the model input was rebuilt, raises TypeError on every non-driver "
    "rank, only at tensor-parallel size > 1 (shipped in vLLM 0.5.1 for `virtual_engine` and in "
    "0.6.0 for `previous_hidden_states`).",
    bad=_BAD,
    good=_GOOD,
)


def _where(path: str, line: int) -> str:
    return f"{PurePath(path).name}:{line}"


def _groups(project: Project) -> dict[tuple[str, str, int], list[Leak]]:
    """Leaks by root cause: the key and where it is added."""
    out: dict[tuple[str, str, int], list[Leak]] = {}
    for step in project.merged_steps():
        for leak in step.leaks:
            origin = leak.origin
            out.setdefault((origin.key, origin.path, origin.line), []).append(leak)
    return out


def _one_per_target(leaks: list[Leak]) -> list[Leak]:
    out: list[Leak] = []
    for leak in leaks:
        if not any(other.target is leak.target for other in out):
            out.append(leak)
    return out


def message(leaks: list[Leak]) -> str:
    origin = leaks[0].origin
    where = _where(origin.path, origin.line)
    how = (
        f"added at {where}, merged in by {origin.part}"
        if origin.extra
        else f"added by {origin.part} at {where}"
    )
    if origin.read_without_pop is not None:
        path, line, _ = origin.read_without_pop
        how += f", read without pop at {_where(path, line)}"
    targets = ", ".join(
        f"`{leak.target.name}(**...)` at {_where(leak.path, leak.line)}"
        for leak in sorted(leaks, key=lambda lk: (lk.path, lk.line))
    )
    return (
        f"key {origin.key!r} of the merged broadcast ({how}) is still in the dict when "
        f"{leaks[0].step} rebuilds the next part: {targets} does not accept it, a TypeError "
        "on every non-driver rank"
    )


def _own_key(project: Project, target: ClassFacts, key: str) -> bool:
    """``target``'s own dict sends ``key`` that its ``cls(**...)`` does not accept: the
    missing field RC102 reports on ``target`` (one cause, one finding: the leak of the
    same key into ``target`` is that finding's, not RC109's)."""
    produced = project.produced(target)
    if produced is None or key not in produced.keys or "__init__" in target.methods:
        return False
    fields = project.dataclass_fields(target)
    if fields is None or not any(k.is_dataclass for k in project.mro(target)):
        return False
    return key not in {name for name, (_, fld) in fields.items() if fld.init}


def check_module(project: Project, module: ModuleFacts) -> Iterator[Finding]:
    """One finding per leaked key and where it enters the dict, placed where the fix
    belongs: the read that should pop it, else where it is added. A target whose own
    dict sends the key without a field for it is RC102's (the missing field)."""
    for found in _groups(project).values():
        origin = found[0].origin
        leaks = [leak for leak in found if not _own_key(project, leak.target, origin.key)]
        if not leaks:
            continue
        path, line, col = origin.read_without_pop or (origin.path, origin.line, 1)
        if path != module.path:
            continue
        silent = [project.silent_worker(leak.worker) for leak in leaks]
        live = [leak for leak, why in zip(leaks, silent, strict=True) if why is None]
        if live:  # the targets under a worker that never broadcasts are not listed
            yield Finding(path, line, col, RULE.code, message(_one_per_target(live)))
        else:
            finding = Finding(path, line, col, RULE.code, message(_one_per_target(leaks)))
            yield finding.as_note(str(silent[0]))


CHECK = CheckRule(RULE, check_module=check_module)
