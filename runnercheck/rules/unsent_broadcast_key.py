"""RC111 unsent-broadcast-key: `from_broadcasted_tensor_dict` reads a key with no default
that the class's `as_broadcastable_tensor_dict` never puts.

The converse of RC102. The receiving side is followed into what it hands the dict to
(``super()``, ``cls``/``self`` methods, methods of named classes, module-level helpers
such as ``_init_sampling_metadata_from_tensor_dict`` in this or an imported module);
a read with no default is ``d[k]``, ``d.pop(k)`` or ``del d[k]`` outside a test that
names the key (``if k in d``, ``d[k] if k in d else ...``, an earlier ``if k not in d:
return``) and outside a ``try``. The sending side is every path of
``as_broadcastable_tensor_dict``: its literal, ``d[k] = ...``, ``update``, the
``super()`` chain and the helpers it calls with the dict; on the merged dict of one
broadcast per step, the keys the other parts and the extras leave for this part count
too.

It reports only when the keys sent are known: any call that receives the dict and
cannot be followed, a ``**`` or ``update`` of an unknown mapping, a computed key, a
base outside the analysed files, on either side, keeps it silent. A dump of another
value's fields (``tensor_dict.update(attn_metadata.asdict_zerocopy())``) adds that
value's fields, which the receiver hands on whole (``make_metadata(**tensor_dict)``):
it does not keep the rule silent, and the message names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import KeyRead, Project
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list
    selected_token_indices: list

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens, "selected_token_indices": self.selected_token_indices}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls(
            input_tokens=tensor_dict.pop("input_tokens"),
            selected_token_indices=tensor_dict["selected_indices"],
        )
"""
_GOOD = _variant(
    _BAD,
    (
        '            selected_token_indices=tensor_dict["selected_indices"],\n',
        '            selected_token_indices=tensor_dict["selected_token_indices"],\n',
    ),
)

RULE = Rule(
    code="RC111",
    name="unsent-broadcast-key",
    tool="check",
    summary=(
        "`from_broadcasted_tensor_dict` reads a key with no default that "
        "`as_broadcastable_tensor_dict` never puts."
    ),
    why=(
        "The driver never sends the key, so every non-driver rank raises KeyError while "
        "rebuilding the input: only at tensor-parallel size > 1, never in single-GPU tests."
    ),
    bad=_BAD,
    good=_GOOD,
)


def _where(project: Project, cls: ClassFacts, read: KeyRead, line: int) -> tuple[str, int, int]:
    """The read itself, or the class's method when the read lies in a file whose findings
    are not reported (a helper read for context)."""
    if project.reportable is None or read.path in project.reportable:
        return read.path, read.line, read.col
    return cls.path, line, 1


def _helper(read: KeyRead, path: str, from_dict: str) -> str:
    """Where the read is, when a helper reads it."""
    if read.function.endswith(f".{from_dict}"):
        return ""
    if read.path == path:
        return f" (in {read.function})"
    return f" (in {read.function}, {read.path}:{read.line})"


@dataclass
class _Unsent:
    """One read of a key no sender puts, with every class whose rebuild runs it."""

    read: KeyRead
    path: str
    line: int
    col: int
    classes: list[ClassFacts] = field(default_factory=list)
    #: The ``as_broadcastable_tensor_dict`` each class sends with.
    senders: list[str] = field(default_factory=list)
    dumps: list[str] = field(default_factory=list)


def _unsent(project: Project, cls: ClassFacts) -> Iterator[tuple[KeyRead, str, list[str]]]:
    """Each key ``cls``'s rebuild reads with no default that no sender puts, with the
    method that sends and the dumps of other values it adds."""
    required = project.required(cls)
    if required is None or required.open or not required.reads:
        return
    produced = project.produced(cls)
    if produced is None or produced.open:
        return
    offered: set[str] | None = None
    for key, read in required.reads.items():
        if key in produced.keys or key in required.puts:
            continue
        if offered is None:
            offered = project.offered_keys(cls)
        if key not in offered:
            yield (
                read,
                f"{produced.method.owner.name}.{project.contract.as_dict_method}",
                (produced.dumps),
            )


def _all_unsent(project: Project) -> list[_Unsent]:
    """Every such read of the project, once per place it is reported."""
    found = project.memo.get(RULE.code)
    if isinstance(found, list):
        return found
    groups: dict[tuple[str, int, int, str], _Unsent] = {}
    for cls in project.all_classes():
        for read, sender, dumps in _unsent(project, cls):
            method = project.required(cls)
            line = method.method.func.line if method is not None else cls.line
            path, line, col = _where(project, cls, read, line)
            group = groups.setdefault((path, line, col, read.key), _Unsent(read, path, line, col))
            group.classes.append(cls)
            if sender not in group.senders:
                group.senders.append(sender)
            group.dumps += [d for d in dumps if d not in group.dumps]
    result = list(groups.values())
    project.memo[RULE.code] = result
    return result


def _finding(project: Project, unsent: _Unsent) -> Finding:
    from_dict = project.contract.from_dict_method
    names = [cls.name for cls in unsent.classes]
    who = f"{names[0]}.{from_dict}" if len(names) == 1 else f"{from_dict} of {', '.join(names)}"
    dumps = "".join(f", nor `{d}()`'s fields" for d in unsent.dumps)
    as_dict = project.contract.as_dict_method
    senders = unsent.senders[0] if len(unsent.senders) == 1 else f"their {as_dict}"
    finding = Finding(
        unsent.path,
        unsent.line,
        unsent.col,
        RULE.code,
        f"{who} reads key {unsent.read.key!r} with no default"
        f"{_helper(unsent.read, unsent.path, from_dict)}, but no path of {senders} puts it"
        f"{dumps}: KeyError on every non-driver rank",
    )
    reasons = [project.unreachable_input(cls) for cls in unsent.classes]
    if all(reasons) and reasons[0] is not None:
        finding = finding.as_note(reasons[0])
    return finding


def check_module(project: Project, module: ModuleFacts) -> Iterator[Finding]:
    for unsent in _all_unsent(project):
        if unsent.path == module.path:
            yield _finding(project, unsent)


CHECK = CheckRule(RULE, check_module=check_module)
