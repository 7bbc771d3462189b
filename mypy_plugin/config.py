"""The plugin's settings: the same keys as ``[tool.runnercheck]`` for the CLI.

Where they are read from, first match wins:

1. mypy's config file is a ``pyproject.toml``: its ``[tool.runnercheck]`` table;
2. mypy's config file is an ini file (``mypy.ini``, ``setup.cfg``) with a
   ``[runnercheck]`` section: that section (lists comma- or line-separated);
3. a ``pyproject.toml`` next to mypy's ini file, then the nearest one at or above
   the current directory: its ``[tool.runnercheck]`` table;
4. the defaults (vLLM's names).

A bad key or value is a :class:`~runnercheck.errors.ConfigError` naming the file
and the key.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from mypy_plugin.rules import BY_CODE
from runnercheck.config import (
    Config,
    config_from_mapping,
    find_pyproject,
    load_config_file,
)
from runnercheck.errors import ConfigError

#: Section of a mypy ini file that holds the plugin's settings.
INI_SECTION = "runnercheck"
_TOML_SECTION = "[tool.runnercheck]"
#: Default settings (an ini value's type follows its default's).
DEFAULTS = Config()


@dataclass(frozen=True)
class PluginSettings:
    """The effective configuration and where it came from."""

    config: Config
    source: str

    @cached_property
    def runner_bases(self) -> frozenset[str]:
        return frozenset(self.config.runner_bases)

    @cached_property
    def input_bases(self) -> frozenset[str]:
        return frozenset(self.config.input_bases)

    @cached_property
    def broadcastable_types(self) -> frozenset[str]:
        return frozenset(self.config.broadcastable_types)

    def reports(self, rule_code: str) -> bool:
        """Whether ``select``/``ignore`` let the rule ``rule_code`` (``RC205``) be reported."""
        known = self._reported.get(rule_code)
        if known is None:
            known = self._reported[rule_code] = self._selects(rule_code)
        return known

    @cached_property
    def _reported(self) -> dict[str, bool]:
        return {}

    def _selects(self, rule_code: str) -> bool:
        rule = BY_CODE.get(rule_code)
        if rule is None:  # a rule of `runnercheck check`: never the plugin's to report
            return False

        def matches(patterns: tuple[str, ...]) -> bool:
            return any(
                rule.code.startswith(p.strip().upper()) or p.strip().lower() == rule.name
                for p in patterns
                if p.strip()
            )

        if self.config.select and not matches(self.config.select):
            return False
        return not matches(self.config.ignore)


def _split_list(raw: str) -> list[str]:
    items = raw.replace("\n", ",").split(",")
    return [item.strip().strip("\"'") for item in items if item.strip().strip("\"'")]


def _config_from_ini(path: Path, section: configparser.SectionProxy) -> Config:
    table: dict[str, Any] = {}
    for key, raw in section.items():
        default = getattr(DEFAULTS, key, None)
        if isinstance(default, dict):
            raise ConfigError(
                f"{path}: [{INI_SECTION}] key {key!r} can only be set in pyproject.toml"
            )
        table[key] = _split_list(raw) if isinstance(default, tuple) else raw.strip()
    return config_from_mapping(table, str(path), section=f"[{INI_SECTION}]")


def _ini_section(path: Path) -> configparser.SectionProxy | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with path.open(encoding="utf-8") as handle:
            parser.read_file(handle)
    except (OSError, UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    return parser[INI_SECTION] if parser.has_section(INI_SECTION) else None


def read_settings(config_file: str | None, cwd: Path) -> PluginSettings:
    """The settings for a mypy run in ``cwd`` whose config file is ``config_file``
    (None: mypy found none). An unknown rule in ``select`` or ``ignore`` is an error
    naming the file, as it is for the CLI (the configuration validates it): otherwise
    ``select = RC999`` would turn every rule off and mypy would say "Success"."""
    config, path, section = _find_config(config_file, cwd)
    if path is None:
        return PluginSettings(config, "defaults")
    source = str(path) if section == _TOML_SECTION else f"{path} {section}"
    return PluginSettings(config, source)


def _find_config(config_file: str | None, cwd: Path) -> tuple[Config, Path | None, str]:
    """The configuration, the file it came from (None: defaults) and its section."""
    if config_file:
        path = Path(config_file)  # as mypy found it: relative to the working directory
        if path.suffix == ".toml":
            return load_config_file(path), path, _TOML_SECTION
        section = _ini_section(path)
        if section is not None:
            return _config_from_ini(path, section), path, f"[{INI_SECTION}]"
        beside = path.parent / "pyproject.toml"
        if beside.is_file():
            return load_config_file(beside), beside, _TOML_SECTION
    found = find_pyproject(cwd)
    if found is not None:
        return load_config_file(found), found, _TOML_SECTION
    return Config(), None, _TOML_SECTION
