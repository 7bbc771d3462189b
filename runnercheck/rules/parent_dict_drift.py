"""RC104 parent-dict-drift: A subclass re-lists its parent's broadcast keys instead of calling `super()`."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Produced, Project
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from dataclasses import dataclass

from vllm.worker.model_runner_base import ModelRunnerBase


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list
    input_positions: list

    def as_broadcastable_tensor_dict(self):
        return {
            "input_tokens": self.input_tokens,
            "input_positions": self.input_positions,
        }


@dataclass(frozen=True)
class PoolingModelInput(ModelInput):
    pooling: list = None

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens, "pooling": self.pooling}

class PoolingModelRunner(ModelRunnerBase[PoolingModelInput]):
    def prepare_model_input(self, seq_group_metadata_list):
        return self._prepare(seq_group_metadata_list)

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        return PoolingModelInput.from_broadcasted_tensor_dict(tensor_dict)

    def execute_model(self, model_input, kv_caches):
        positions = model_input.input_positions
        hidden = self.model(model_input.input_tokens, positions, kv_caches)
        return self.pool(hidden, model_input.pooling)
"""
_GOOD = _variant(
    _BAD,
    (
        '        return {"input_tokens": self.input_tokens, "pooling": self.pooling}\n',
        (
            "        tensor_dict = super().as_broadcastable_tensor_dict()\n"
            '        tensor_dict["pooling"] = self.pooling\n'
            "        return tensor_dict\n"
            "\n"
        ),
    ),
)

RULE = Rule(
    code="RC104",
    name="parent-dict-drift",
    tool="check",
    summary="A subclass re-lists its parent's broadcast keys instead of calling `super()`.",
    why="The copy drifts: a key later added to the parent is never broadcast by the subclass, and "
    "one the subclass dropped goes unnoticed. An error when the copy already drops a key that a "
    "runner building the subclass reads on a non-driver rank's path; the copy itself is a note.",
    bad=_BAD,
    good=_GOOD,
)


def _dropped(project: Project, cls: ClassFacts, produced: Produced) -> dict[str, str]:
    """Fields of ``cls`` that an ancestor's dict sends and the copy does not (directly or
    through a helper), with the ancestor that sends each; keys the merged dict delivers
    anyway and driver-only fields are not dropped."""
    as_dict = project.contract.as_dict_method
    fields = project.dataclass_fields(cls) or {}
    sent = set(produced.keys) | produced.fields | project.delivered_keys(cls)
    out: dict[str, str] = {}
    after = cls
    while True:
        ref = project.resolve_method(cls, as_dict, after=after)
        if ref is None or ref.func.is_stub or ref.func.is_abstract:
            break
        ancestor = project.produced_by(ref.owner, ref)
        for key in [*ancestor.keys, *sorted(ancestor.fields)]:
            if key in sent or key in out or key not in fields:
                continue
            if project.is_driver_only(cls, fields[key][1]):
                continue
            out[key] = ref.owner.name
        after = ref.owner
    return out


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A subclass re-listing its parent's keys instead of calling ``super()``: a note
    while the copy sends what the parent sends; else one finding for the copy and the
    keys it drops that some ancestor sends (never a note beside it on the same line),
    an error when a runner building the class reads one of them on every rank's path."""
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
    relists = (
        f"{cls.name}.{as_dict} re-lists {len(relisted)} "
        f"{'key' if len(relisted) == 1 else 'keys'} of {parent_name} instead of calling "
        "super()"
    )
    dropped = _dropped(project, cls, produced)
    if not dropped:
        yield Finding(
            own.path,
            own.line,
            own.col,
            RULE.code,
            f"{relists}; the copy drifts when the parent changes",
        ).as_note("the copy sends what the parent sends today")
        return
    # one cause, one finding: the copy that drifted, with what it drops
    reads = project.every_rank_reads(cls, sent_by=True)
    read = [k for k in dropped if reads is not None and k in reads]
    by_sender: dict[str, list[str]] = {}
    for key, sender in dropped.items():
        by_sender.setdefault(sender, []).append(repr(key))
    listed = "; ".join(f"{', '.join(keys)} (sent by {who})" for who, keys in by_sender.items())
    message = f"{relists}, and drops {listed}"
    if read:
        message += (
            f": read on every rank ({', '.join(repr(k) for k in read)}), non-driver ranks "
            "see the default"
        )
    finding = Finding(own.path, own.line, own.col, RULE.code, message)
    unreachable = project.unreachable_input(cls)
    if unreachable is not None:
        finding = finding.as_note(unreachable)
    elif not read:
        finding = finding.as_note(
            "no runner that builds it reads these keys on a non-driver rank's path"
        )
    yield finding


CHECK = CheckRule(RULE, check_class=check_class, reads_partners=False)
