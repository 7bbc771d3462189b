"""RC102 unaccepted-broadcast-key: A key is broadcast that the receiving `cls(**tensor_dict)` does not accept."""

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
        return {"input_tokens": self.input_tokens, "num_prefills": 3}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls(**tensor_dict)
"""
_GOOD = _variant(
    _BAD,
    (
        "    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):\n",
        (
            "    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):\n"
            '        tensor_dict.pop("num_prefills")\n'
        ),
    ),
)

RULE = Rule(
    code="RC102",
    name="unaccepted-broadcast-key",
    tool="check",
    summary="A key is broadcast that the receiving `cls(**tensor_dict)` does not accept.",
    why="The receiver raises TypeError (unexpected keyword argument), and only at tensor-parallel size > 1. Where the value reads an attribute the class does not define (`self.x` for a key `x` that is no field), the driver raises AttributeError first, before anything is sent, and the message says so.",
    bad=_BAD,
    good=_GOOD,
)


def _defined(project: Project, cls: ClassFacts) -> _Everything | set[str]:
    """The attributes an instance of ``cls`` has (fields, class attributes, methods and
    properties, ``self.X = ...``), along its MRO; everything when a base is outside the
    analysed files."""
    if project.unknown_bases(cls):
        return _EVERYTHING
    names: set[str] = set()
    for klass in project.mro(cls):
        names.update(f.name for f in klass.fields)
        names.update(klass.class_attrs, klass.methods, klass.self_attrs, klass.annotations)
    return names


class _Everything:
    def __contains__(self, name: object) -> bool:
        return True


_EVERYTHING = _Everything()


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A literal key of the broadcast dict that ``target(**tensor_dict)`` does not accept."""
    as_dict = project.contract.as_dict_method
    from_dict = project.contract.from_dict_method
    produced = project.produced(cls)
    if produced is None:
        return
    defined = _defined(project, cls)
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
            rejected = (
                f"neither a field of {target.name} nor popped before "
                f"`{receiver.target_name}(**...)` in {receiver.method.owner.name}.{from_dict}"
            )
            missing = next((f for f in kf.fields if f not in defined), None)
            if missing is not None:
                # the driver fails first: building the dict reads an attribute that
                # does not exist, before anything is sent
                text = (
                    f"key {key!r} broadcast by {cls.name}.{as_dict} reads `self.{missing}`, "
                    f"which {cls.name} does not define: AttributeError on the driver before "
                    f"anything is sent (defined, the key is {rejected}: TypeError on "
                    "non-driver ranks)"
                )
            else:
                text = (
                    f"key {key!r} broadcast by {cls.name}.{as_dict} is {rejected}: TypeError "
                    "on non-driver ranks"
                )
            yield Finding(kf.path, kf.line, kf.col, RULE.code, text)


CHECK = CheckRule(RULE, check_class=check_class, reads_partners=False)
