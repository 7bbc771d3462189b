"""RC108 unpicklable-broadcast-value: A value put in the broadcast dict cannot be pickled or broadcast."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts, DictFacts, FunctionFacts, KeyFacts, ModuleFacts
from runnercheck.analysis.project import MethodRef, Project
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list

    def as_broadcastable_tensor_dict(self):
        return {
            "input_tokens": self.input_tokens,
            "sampler": lambda logits: logits.argmax(-1),
        }
"""
_GOOD = _variant(
    _BAD,
    (
        (
            "        return {\n"
            '            "input_tokens": self.input_tokens,\n'
            '            "sampler": lambda logits: logits.argmax(-1),\n'
            "        }\n"
        ),
        '        return {"input_tokens": self.input_tokens, "greedy": True}\n',
    ),
)

RULE = Rule(
    code="RC108",
    name="unpicklable-broadcast-value",
    tool="check",
    summary="A value put in the broadcast dict cannot be pickled or broadcast.",
    why="Lambdas, generators, locks, open files, CUDA streams and modules fail in `broadcast_object_list` on the driver, only when tensor parallelism is on.",
    bad=_BAD,
    good=_GOOD,
)


def _finding(kf: KeyFacts) -> Finding:
    return Finding(
        kf.path,
        kf.line,
        kf.col,
        RULE.code,
        f"value of key {kf.key!r} in the broadcast dict is {kf.bad_value}: it cannot be "
        "pickled or broadcast",
    )


def _local_keys(func: FunctionFacts, facts: DictFacts, seen: set[str]) -> Iterator[KeyFacts]:
    if facts.name in seen:
        return
    seen.add(facts.name)
    yield from facts.keys.values()
    for name in facts.merges:
        other = func.dicts.get(name)
        if other is not None:
            yield from _local_keys(func, other, seen)


def _broadcast_dicts(project: Project, functions: list[FunctionFacts]) -> Iterator[Finding]:
    """Dicts handed to the broadcast function directly."""
    broadcast = project.contract.broadcast_function
    for func in functions:
        for facts in func.dicts.values():
            if not any(h.callee.rsplit(".", 1)[-1] == broadcast for h in facts.helpers):
                continue
            for kf in _local_keys(func, facts, set()):
                if kf.bad_value is not None:
                    yield _finding(kf)


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    own = cls.methods.get(project.contract.as_dict_method)
    if own is not None and not own.is_stub:
        produced = project.produced_by(cls, MethodRef(cls, own))
        for kf in produced.keys.values():
            if kf.bad_value is not None:
                yield _finding(kf)
    yield from _broadcast_dicts(project, list(cls.methods.values()))


def check_module(project: Project, module: ModuleFacts) -> Iterator[Finding]:
    yield from _broadcast_dicts(project, list(module.functions.values()))


CHECK = CheckRule(RULE, check_class=check_class, check_module=check_module, reads_partners=False)
