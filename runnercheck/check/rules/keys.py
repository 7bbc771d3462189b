"""Keys produced versus accepted: RC102 unaccepted-broadcast-key, RC103 unbroadcast-field,
RC104 parent-dict-drift."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.findings import Finding


def unaccepted_keys(project: Project, cls: ClassFacts) -> Iterator[Finding]:
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
                "RC102",
                f"key {key!r} broadcast by {cls.name}.{as_dict} is neither a field of "
                f"{target.name} nor popped before `{receiver.target_name}(**...)` in "
                f"{receiver.method.owner.name}.{from_dict}: TypeError on non-driver ranks",
            )


def unbroadcast_fields(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A dataclass field whose value never reaches the broadcast dict."""
    as_dict = project.contract.as_dict_method
    for fld in project.unbroadcast_fields(cls):
        produced = project.produced(cls)
        assert produced is not None
        yield Finding(
            cls.path,
            fld.line,
            fld.col,
            "RC103",
            f"field {fld.name!r} of {cls.name} is not broadcast by "
            f"{produced.method.owner.name}.{as_dict} and not declared driver-only: "
            "non-driver ranks see its default",
        )


def parent_dict_drift(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A subclass re-listing its parent's keys instead of calling ``super()``."""
    as_dict = project.contract.as_dict_method
    own = cls.methods.get(as_dict)
    if own is None or own.is_stub or own.is_abstract:
        return
    parent_ref = project.resolve_method(cls, as_dict, after=cls)
    if parent_ref is None or parent_ref.func.is_stub or parent_ref.func.is_abstract:
        return
    produced = project.produced(cls)
    if produced is None or produced.calls_super:
        return
    parent = project.produced_by(parent_ref.owner, parent_ref)
    relisted = [k for k in parent.keys if k in produced.keys]
    if not relisted:
        return
    parent_name = f"{parent_ref.owner.name}.{as_dict}"
    yield Finding(
        own.path,
        own.line,
        own.col,
        "RC104",
        f"{cls.name}.{as_dict} re-lists {len(relisted)} "
        f"{'key' if len(relisted) == 1 else 'keys'} of {parent_name} instead "
        "of calling super(); the copy drifts when the parent changes",
    )
    fields = project.dataclass_fields(cls) or {}
    dropped = [k for k in parent.keys if k not in produced.keys]
    # fields the parent sends through helpers (attention metadata, ...)
    dropped += sorted(
        f
        for f in parent.fields - produced.fields - set(produced.keys)
        if f not in parent.keys and f in fields
    )
    for key in dropped:
        if key in fields and project.is_driver_only(cls, fields[key][1]):
            continue
        yield Finding(
            own.path,
            own.line,
            own.col,
            "RC104",
            f"{cls.name}.{as_dict} drops {key!r}, which {parent_name} broadcasts",
        )
