"""``[tool.runnercheck]``: reading and validating the target project's configuration.

The configuration lives in the nearest ``pyproject.toml`` above the checked path
(or in the file given with ``--config``). Every key is optional; the defaults
match vLLM. Unknown keys and wrong types are errors that name the file and key::

    [tool.runnercheck]
    runner_bases = ["ModelRunnerBase", "GPUModelRunnerBase"]
    driver_only = ["ModelInputForGPU.seq_lens"]
    exclude = ["tests/*"]
    broadcastable_types = ["vllm.lora.request.LoRARequest"]
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from runnercheck import catalog
from runnercheck.contract import Contract
from runnercheck.errors import ConfigError
from runnercheck.excludes import MAX_EXCLUDE_PATTERNS
from runnercheck.files import DEFAULT_MAX_FILE_SIZE
from runnercheck.tomlfile import load_toml

TABLE = ("tool", "runnercheck")


@dataclass(frozen=True)
class Config(Contract):
    """The contract names plus the tools' own settings."""

    #: Glob patterns (matched against paths relative to the project root) to skip.
    exclude: tuple[str, ...] = ()
    #: Rule codes to report (empty: all).
    select: tuple[str, ...] = ()
    #: Rule codes never reported (``check``'s findings, ``migrate``'s refusals).
    ignore: tuple[str, ...] = ()
    #: Rule codes not reported in the files a glob matches, as ``{"GLOB": ["CODE"]}``.
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Fully qualified type names that the mypy plugin accepts as broadcastable values.
    broadcastable_types: tuple[str, ...] = ()
    #: ``fuzz``: Hypothesis strategies for opaque types or fields, as
    #: ``{"TypeName or Class.field": "module:function_returning_a_strategy"}``.
    fuzz_strategies: dict[str, str] = field(default_factory=dict)
    #: ``check`` and ``migrate``: files larger than this many bytes are reported, not read.
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    #: ``fuzz``: keys the worker adds to every composed step's merged dict, as
    #: ``{"NAME": "TYPE"}`` (``tensor``, ``int``, ``float``, ``bool``, ``str``, ``bytes``
    #: or ``module:attr``).
    fuzz_extras: dict[str, str] = field(default_factory=dict)
    #: ``check``: directories holding packages that the checked files import, read (never
    #: imported) for context only, before the installed packages (relative to the
    #: project root).
    context: tuple[str, ...] = ()

    def contract(self) -> Contract:
        """The contract names alone (what the analyses need)."""
        return Contract(**{f.name: getattr(self, f.name) for f in fields(Contract)})


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` (a file or directory)."""
    start = Path(os.path.realpath(start))
    here = start if os.path.isdir(start) else start.parent
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if os.path.isfile(candidate):  # False, not an error, in a directory we cannot read
            return candidate
    return None


#: What a pydantic error type expects, in TOML's words.
_EXPECTED = {
    "tuple_type": "an array of strings",
    "list_type": "an array of strings",
    "string_type": "a string",
    "dict_type": "a table of strings",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
}


def toml_type(value: Any) -> str:
    """What a TOML value is, in TOML's words."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    return f"a {type(value).__name__}"


def _location(loc: Any) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``; did you mean 'X'?`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _describe(error: Mapping[str, Any]) -> str:
    loc = _location(error.get("loc", ()))
    kind = error.get("type", "")
    if kind in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"unknown key {loc!r}{did_you_mean(loc, (f.name for f in fields(Config)))}"
    expected = _EXPECTED.get(kind)
    if expected is not None:
        return f"key {loc!r}: expected {expected}, got {toml_type(error.get('input'))}"
    return f"key {loc!r}: {error.get('msg', 'invalid value')}"


#: Keys holding one Python name (a function, method, attribute or class).
_NAME_KEYS = (
    "worker_input",
    "broadcast_function",
    "as_dict_method",
    "from_dict_method",
    "make_input_method",
    "prepare_input_method",
    "execute_method",
    "driver_flag",
)
#: Keys holding class names, of which there must be at least one (none would turn
#: every check of those classes off).
_CLASS_LIST_KEYS = ("runner_bases", "input_bases", "worker_bases")
#: Keys holding method names (an empty list is allowed: nothing is required).
_METHOD_LIST_KEYS = ("worker_methods", "runner_methods")


def _is_name(text: str, dotted: bool = False) -> bool:
    parts = text.split(".") if dotted else [text]
    return all(part.isidentifier() for part in parts)


def unknown_rule(entry: str) -> str | None:
    """Why a ``select``/``ignore`` entry names no rule, with the closest rule (None: it
    names one: a code, a name, or a prefix of codes such as ``RC2``)."""
    pattern = entry.strip()
    if not pattern:
        return None
    codes, names = catalog.rule_words()
    if pattern.lower() in names or any(code.startswith(pattern.upper()) for code in codes):
        return None
    if any(char.isdigit() for char in pattern):  # a code, mistyped
        hint = did_you_mean(pattern.upper(), codes)
    else:
        hint = did_you_mean(pattern.lower(), names)
    return f"unknown rule {pattern!r}{hint}"


def _value_errors(table: Mapping[str, Any], config: Config) -> Iterator[str]:
    """What the types alone do not say, as ``key 'K': why`` texts: values that would
    silently turn checking off (an empty or non-identifier name, a driver-only entry
    that is not ``Class.field``, an unknown rule), ``max_file_size`` out of range and an
    ``exclude`` list longer than :data:`~runnercheck.excludes.MAX_EXCLUDE_PATTERNS`."""
    if len(config.exclude) > MAX_EXCLUDE_PATTERNS:
        yield (
            f"key 'exclude': {len(config.exclude)} patterns, more than runnercheck takes "
            f"({MAX_EXCLUDE_PATTERNS})"
        )
    size = table.get("max_file_size", config.max_file_size)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        yield f"key 'max_file_size': expected a positive integer (bytes), got {size!r}"
    for key in _NAME_KEYS:
        value = getattr(config, key)
        if key in table and not _is_name(value):
            yield f"key {key!r}: expected a Python name, got {value!r}"
    for key in _CLASS_LIST_KEYS:
        if key in table and not getattr(config, key):
            yield f"key {key!r}: expected at least one class name, got an empty array"
    for key in (*_CLASS_LIST_KEYS, *_METHOD_LIST_KEYS):
        for index, value in enumerate(getattr(config, key) if key in table else ()):
            if not _is_name(value, dotted=key in _CLASS_LIST_KEYS):
                yield f"key '{key}[{index}]': expected a Python name, got {value!r}"
    for index, value in enumerate(config.driver_only):
        owner, dot, name = value.rpartition(".")
        if not (dot and _is_name(owner, dotted=True) and _is_name(name)):
            yield f"key 'driver_only[{index}]': expected 'Class.field', got {value!r}"
    if "driver_only_key" in table and not config.driver_only_key.strip():
        yield "key 'driver_only_key': expected a non-empty string"
    for index, value in enumerate(config.broadcastable_types):
        if not _is_name(value, dotted=True):
            yield (
                f"key 'broadcastable_types[{index}]': expected a qualified type name "
                f"such as 'pkg.module.Type', got {value!r}"
            )
    for key in ("select", "ignore"):
        for value in getattr(config, key):
            reason = unknown_rule(value)
            if reason is not None:
                yield f"key {key!r}: {reason} (see `runnercheck rules`)"
    for glob, codes in config.per_file_ignores.items():
        for value in codes:
            reason = unknown_rule(value)
            if reason is not None:
                yield f"key 'per_file_ignores.{glob}': {reason} (see `runnercheck rules`)"


def _plain_value(kind: str, value: Any) -> tuple[bool, Any]:
    """(whether ``value`` is plainly of the field type ``kind``, the value to store)."""
    if kind == "str":
        return isinstance(value, str), value
    if kind == "tuple[str, ...]":
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        return ok, tuple(value) if ok else value
    if kind == "dict[str, str]":
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
        return ok, dict(value) if ok else value
    if kind == "dict[str, tuple[str, ...]]":
        ok = isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(c, str) for c in v)
            for k, v in value.items()
        )
        return ok, {k: tuple(v) for k, v in value.items()} if ok else value
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    return False, value


def _plain_config(table: Mapping[str, Any]) -> Config | None:
    """The configuration of a table whose every key is known and every value plainly of
    its field's type (what pydantic would build from it), else None: pydantic then
    validates it and names what is wrong. Keeps pydantic off ``check``'s start-up."""
    kinds = {f.name: str(f.type) for f in fields(Config)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        kind = kinds.get(key)
        if kind is None:
            return None
        ok, values[key] = _plain_value(kind, value)
        if not ok:
            return None
    return Config(**values)


def config_from_mapping(
    table: Mapping[str, Any], source: str, section: str = "[tool.runnercheck]"
) -> Config:
    """Validate a ``[tool.runnercheck]`` table (or another ``section`` holding the same
    keys, e.g. ``[runnercheck]`` of a mypy ini file); errors name ``source`` and the key."""
    if not table:
        return Config()
    plain = _plain_config(table)
    if plain is not None:  # the usual table: no need to import pydantic
        return _checked(table, plain, source, section)
    try:  # only when there is something to check
        from pydantic import TypeAdapter, ValidationError
    except ImportError:
        raise ConfigError(
            f"{source}: reading {section} needs pydantic (pip install pydantic)"
        ) from None

    try:
        config = TypeAdapter(Config).validate_python(dict(table))
    except ValidationError as exc:
        first = exc.errors()[0]
        more = len(exc.errors()) - 1
        suffix = f" (and {more} more)" if more else ""
        raise ConfigError(f"{source}: {section} {_describe(first)}{suffix}") from None
    return _checked(table, config, source, section)


def _checked(table: Mapping[str, Any], config: Config, source: str, section: str) -> Config:
    """``config`` when its values pass :func:`_value_errors`, else the first problem as
    one line naming ``source`` and the key."""
    for problem in _value_errors(table, config):
        raise ConfigError(f"{source}: {section} {problem}")
    return config


def load_config_file(path: Path) -> Config:
    """Read ``[tool.runnercheck]`` from one TOML file (missing table: defaults)."""
    table: Any = load_toml(path)
    for key in TABLE:
        table = table.get(key, {}) if isinstance(table, dict) else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.runnercheck] must be a table")
    return config_from_mapping(table, str(path))


def config_as_dict(config: Contract) -> dict[str, Any]:
    """Every setting by name, with JSON-friendly values (lists for tuples)."""
    return {
        f.name: list(value) if isinstance(value, tuple) else value
        for f in fields(config)
        for value in [getattr(config, f.name)]
    }


def load_config(start: Path | None = None, config_file: Path | None = None) -> Config:
    """The configuration for a run: ``config_file`` if given, else the nearest
    ``pyproject.toml`` above ``start`` (default: the current directory), else defaults."""
    if config_file is not None:
        if not os.path.exists(config_file):
            raise ConfigError(f"{config_file}: configuration file not found")
        return load_config_file(config_file)  # a FIFO or device: "not a regular file"
    found = find_pyproject(start if start is not None else Path.cwd())
    if found is None:
        return Config()
    return load_config_file(found)
