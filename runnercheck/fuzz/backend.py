"""The attention backend a round trip uses when none is given.

Engines rebuild the attention metadata of a received dict with the backend the runner
built (``attn_backend.make_metadata(**fields)`` over the fields of
``attn_backend.get_metadata_cls()``). Without ``--attn-backend``, an input class whose
``from_broadcasted_tensor_dict`` takes one gets :class:`AnnotatedBackend`: the
metadata class its ``attn_metadata`` field is annotated with (the one generated; for an
input that holds another input class, as vLLM's multi-step input holds the single-step
one, that class's), so
the metadata keys of the dict are rebuilt into that class, as the engine's backend
would rebuild its own, instead of reaching ``cls(**tensor_dict)``.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from runnercheck.fuzz.roundtrip import takes_backend
from runnercheck.fuzz.strategies import field_annotations

#: The field that holds an input's attention metadata.
METADATA_FIELD = "attn_metadata"


@dataclass(frozen=True)
class AnnotatedBackend:
    """A stand-in attention backend whose metadata class is ``metadata_cls``."""

    metadata_cls: type

    def get_name(self) -> str:
        return f"annotated:{self.metadata_cls.__qualname__}"

    def get_metadata_cls(self) -> type:
        return self.metadata_cls

    def make_metadata(self, *args: Any, **kwargs: Any) -> Any:
        """The metadata rebuilt from its fields; None when none came (the driver sent
        no metadata: an input whose ``attn_metadata`` is None, which a real backend
        never sees, as a real driver always builds one)."""
        if not args and not kwargs:
            return None
        return self.metadata_cls(*args, **kwargs)


def metadata_class(cls: type, from_dict_method: str | None = None) -> type | None:
    """The dataclass ``cls``'s ``attn_metadata`` field is annotated with (inside an
    Optional), or None. Given the contract's ``from_dict_method``, an input without such
    a field of its own is looked into: a field that holds another input class (one
    with that method; vLLM's multi-step input holds the single-step input, whose
    metadata its receivers rebuild with the runner's backend) gives that class's."""
    return _metadata_class(cls, from_dict_method, set())


def _metadata_class(cls: type, from_dict_method: str | None, seen: set[type]) -> type | None:
    if not dataclasses.is_dataclass(cls) or cls in seen:
        return None
    seen.add(cls)
    try:
        annotations = field_annotations(cls)
    except Exception:  # an annotation that does not resolve: the strategy says so
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    if METADATA_FIELD in names:
        found = _dataclasses_in(annotations.get(METADATA_FIELD))
        return found[0] if len(found) == 1 else None
    if from_dict_method is None:
        return None
    inner = {
        metadata
        for name in names
        for nested in _dataclasses_in(annotations.get(name))
        if callable(getattr(nested, from_dict_method, None))
        for metadata in [_metadata_class(nested, from_dict_method, seen)]
        if metadata is not None
    }
    return inner.pop() if len(inner) == 1 else None


def _dataclasses_in(annotation: Any) -> list[type]:
    """The dataclasses an annotation names, alone or inside an Optional/Union."""
    candidates = typing.get_args(annotation) or (annotation,)
    return [c for c in candidates if isinstance(c, type) and dataclasses.is_dataclass(c)]


def backend_for(cls: type, from_dict_method: str, given: Any) -> Any:
    """The backend receivers rebuild ``cls`` with: the given one, else a stand-in for
    the annotated metadata class (of ``cls`` or of an input class it holds) when
    ``from_dict_method`` takes a backend."""
    if given is not None:
        return given
    if not takes_backend(getattr(cls, from_dict_method, None)):
        return None
    metadata = metadata_class(cls, from_dict_method)
    return AnnotatedBackend(metadata) if metadata is not None else None
