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

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import KeyRead, Project
from runnercheck.catalog import Rule
from runnercheck.check.rules.base import CheckRule
from runnercheck.findings import Finding

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
    bad="""\
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
""",
    good="""\
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
            selected_token_indices=tensor_dict["selected_token_indices"],
        )
""",
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


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    required = project.required(cls)
    if required is None or required.open or not required.reads:
        return
    produced = project.produced(cls)
    if produced is None or produced.open:
        return
    missing = [
        read
        for key, read in required.reads.items()
        if key not in produced.keys and key not in required.puts
    ]
    if not missing:
        return
    offered = project.offered_keys(cls)
    owner = required.method.owner
    inherited = owner is not cls and _reports(project, owner)
    as_dict = project.contract.as_dict_method
    from_dict = project.contract.from_dict_method
    dumps = "".join(f", nor `{d}()`'s fields" for d in dict.fromkeys(produced.dumps))
    unreachable = project.unreachable_input(cls)
    for read in missing:
        if read.key in offered or (inherited and read.key in _missing_keys(project, owner)):
            continue
        path, line, col = _where(project, cls, read, required.method.func.line)
        finding = Finding(
            path,
            line,
            col,
            RULE.code,
            f"{cls.name}.{from_dict} reads key {read.key!r} with no default"
            f"{_helper(read, path, from_dict)}, but no path of "
            f"{produced.method.owner.name}.{as_dict} puts it{dumps}: KeyError on every "
            "non-driver rank",
        )
        if unreachable is not None:
            finding = finding.as_note(unreachable)
        yield finding


def _missing_keys(project: Project, cls: ClassFacts) -> set[str]:
    required = project.required(cls)
    produced = project.produced(cls)
    if required is None or produced is None:
        return set()
    return {k for k in required.reads if k not in produced.keys and k not in required.puts}


def _reports(project: Project, cls: ClassFacts) -> bool:
    """The class that defines the inherited method is checked with the same reads."""
    required = project.required(cls)
    produced = project.produced(cls)
    return required is not None and not required.open and produced is not None and not produced.open


CHECK = CheckRule(RULE, check_class=check_class)
