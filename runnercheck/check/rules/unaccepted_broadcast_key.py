"""RC102 unaccepted-broadcast-key: A key is broadcast that the receiving `cls(**tensor_dict)` does not accept."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.catalog import Rule
from runnercheck.check.rules.base import CheckRule
from runnercheck.findings import Finding

RULE = Rule(
    code="RC102",
    name="unaccepted-broadcast-key",
    tool="check",
    summary="A key is broadcast that the receiving `cls(**tensor_dict)` does not accept.",
    why="The receiver raises TypeError (unexpected keyword argument), and only at tensor-parallel size > 1.",
    bad="""\
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens, "num_prefills": 3}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls(**tensor_dict)
""",
    good="""\
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens, "num_prefills": 3}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        tensor_dict.pop("num_prefills")
        return cls(**tensor_dict)
""",
)


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A literal key of the broadcast dict that ``target(**tensor_dict)`` does not accept."""
    as_dict = project.contract.as_dict_method
    from_dict = project.contract.from_dict_method
    produced = project.produced(cls)
    if produced is None:
        return
    for receiver in project.receivers(cls):
        target = receiver.target
        if target is None or "__init__" in target.methods:
            continue
        fields = project.dataclass_fields(target)
        if fields is None or not any(k.is_dataclass for k in project.mro(target)):
            continue
        accepted = {name for name, (_, fld) in fields.items() if fld.init}
        for key, kf in produced.keys.items():
            if key in accepted or key in receiver.popped:
                continue
            yield Finding(
                kf.path,
                kf.line,
                kf.col,
                RULE.code,
                f"key {key!r} broadcast by {cls.name}.{as_dict} is neither a field of "
                f"{target.name} nor popped before `{receiver.target_name}(**...)` in "
                f"{receiver.method.owner.name}.{from_dict}: TypeError on non-driver ranks",
            )


CHECK = CheckRule(RULE, check_class=check_class)
