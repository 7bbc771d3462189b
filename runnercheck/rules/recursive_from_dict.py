"""RC101 recursive-from-dict: `from_broadcasted_tensor_dict` calls itself on its own class."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls.from_broadcasted_tensor_dict(tensor_dict)
"""
_GOOD = _variant(
    _BAD,
    (
        "        return cls.from_broadcasted_tensor_dict(tensor_dict)\n",
        "        return cls(**tensor_dict)\n",
    ),
)

RULE = Rule(
    code="RC101",
    name="recursive-from-dict",
    tool="check",
    summary="`from_broadcasted_tensor_dict` calls itself on its own class.",
    why="The classmethod recurses until RecursionError, but only on non-driver ranks, so single-GPU tests never see it.",
    bad=_BAD,
    good=_GOOD,
)


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    name = project.contract.from_dict_method
    func = cls.methods.get(name)
    if func is None or not func.params:
        return
    own = {f"{func.params[0]}.{name}", f"{cls.name}.{name}"}
    for call in func.calls:
        if call.callee in own and not call.nested:
            receiver = call.callee.rsplit(".", 1)[0]
            finding = Finding(
                func.path,
                call.line,
                call.col,
                RULE.code,
                f"{cls.name}.{name} calls itself on `{receiver}`: infinite recursion "
                "on every non-driver rank",
            )
            unreachable = project.unreachable_input(cls)
            if unreachable is not None:
                finding = finding.as_note(unreachable)
            yield finding


CHECK = CheckRule(RULE, check_class=check_class, reads_partners=False)
