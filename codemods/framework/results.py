"""What a migration of one group produced: the new modules and texts, and a summary
per runner. Plain data, light to import (the pipeline holds it before any LibCST
work, and results cross process boundaries as text)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import libcst as cst


@dataclass
class DroppedKey:
    key: str
    #: the returned value whose own dict carries the key (``attn_metadata``)
    carrier: str
    #: how the driver merges that dict in (``attn_metadata.asdict_zerocopy()``)
    merged: str
    #: the call that rebuilds the value carrying the key (``make_metadata``)
    constructor: str
    #: the dict entry dropped (locates a refusal)
    node: cst.CSTNode | None = None

    @property
    def why(self) -> str:
        return (
            f"{self.key!r} already travels inside `{self.carrier}`: the driver merges "
            f"`{self.merged}` into the same dict after it, the non-driver reads it only "
            f"through `{self.constructor}(**...)`, and every `{self.constructor}(...)` call "
            f"passes `{self.key}=`"
        )


@dataclass
class RunnerSummary:
    runner: str
    input_class: str
    fields: list[str]
    driver_only: list[str]
    keys: list[str]
    dynamic: list[str]
    dropped: list[DroppedKey]
    #: the runner subclasses a runner with another input (``# type: ignore[override]``)
    narrows: str = ""
    #: where the runner's behaviour changes: (file name, line, what changes)
    notes: list[tuple[str, int, str]] = field(default_factory=list)
    #: the legacy method the rewrite removed ("" for none), and per position of its
    #: result the input field that holds it ("" where none does)
    removed_method: str = ""
    returned_fields: list[str] = field(default_factory=list)
    #: the input's fields declared Optional
    optional_fields: list[str] = field(default_factory=list)


@dataclass
class GroupResult:
    """The new modules of the files the group touches and the text of new files."""

    label: str
    modules: dict[Path, cst.Module] = field(default_factory=dict)
    sources: dict[Path, str] = field(default_factory=dict)
    #: imported names each rewritten module read before (see :func:`finish`)
    used_before: dict[Path, set[str]] = field(default_factory=dict)
    created: list[Path] = field(default_factory=list)
    runners: list[RunnerSummary] = field(default_factory=list)
    worker_keys: dict[str, list[str]] = field(default_factory=dict)
    #: every worker (file, class) a shared worker input this group uses was made for
    shared_with: list[tuple[str, str]] = field(default_factory=list)
    #: latent bugs of the workers' steps carried over: (file, line, what)
    worker_notes: list[tuple[str, int, str]] = field(default_factory=list)
    #: the directories whose workers this group moved onto a shared step base
    hoisted: list[Path] = field(default_factory=list)
