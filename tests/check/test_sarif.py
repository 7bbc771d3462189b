"""``runnercheck check --format sarif`` read as a SARIF consumer reads it.

The log is validated with the pydantic models of ``sarif-pydantic`` (SARIF 2.1.0). Those
models accept unknown properties, so every object is also required to have none: a
misspelt SARIF property (``ruleID``, ``startline``) fails here. Every result location
is then resolved the way a consumer does, through ``originalUriBaseIds``, to the file
and line the text output names.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

import pytest
from pydantic import BaseModel, ValidationError
from sarif_pydantic import Sarif

from runnercheck.demo.engine import engine_source_dir


def run_check(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def unknown_properties(node: Any, where: str = "$") -> list[str]:
    """Paths of the properties that no SARIF 2.1.0 model declares."""
    found: list[str] = []
    if isinstance(node, BaseModel):
        found += [f"{where}.{key}" for key in node.model_extra or {}]
        for name in type(node).model_fields:
            if name != "properties":  # property bags hold anything, by the standard
                found += unknown_properties(getattr(node, name), f"{where}.{name}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found += unknown_properties(item, f"{where}[{i}]")
    elif isinstance(node, dict):
        for key, value in node.items():
            found += unknown_properties(value, f"{where}[{key!r}]")
    return found


def validate(text: str) -> Sarif:
    log = Sarif.model_validate_json(text)
    assert unknown_properties(log) == []
    return log


def resolve(log: Sarif, location: Any) -> Path:
    """A result's file, as a consumer resolves it (SARIF 2.1.0, 3.4.4: uriBaseId)."""
    artifact = location.physical_location.artifact_location
    uri = artifact.uri
    if artifact.uri_base_id is not None:
        bases = log.runs[0].original_uri_base_ids or {}
        base = bases[artifact.uri_base_id].uri
        assert base is not None and base.endswith("/")
        uri = urljoin(base, uri)
    parsed = urlparse(uri)
    assert parsed.scheme == "file", uri
    return Path(unquote(parsed.path))


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(
        engine_source_dir("legacy"),
        project / "my engine",  # a space: the URI must be percent-encoded
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return project


def test_sarif_validates_and_every_location_resolves(engine: Path) -> None:
    text = run_check(engine, "my engine")
    sarif = run_check(engine, "--format", "sarif", "my engine")
    assert sarif.returncode == text.returncode == 1
    log = validate(sarif.stdout)
    assert log.version == "2.1.0"
    (run,) = log.runs
    assert run.tool.driver.name == "runnercheck"
    assert run.tool.driver.information_uri is None  # no page to point at
    assert run.original_uri_base_ids is not None
    assert run.original_uri_base_ids["%SRCROOT%"].uri == engine.as_uri() + "/"

    expected = []
    for line in text.stdout.splitlines()[:-1]:
        where, finding = line.split(": ", 1)
        code, message = finding.split(" ", 1)
        expected.append([where, code, message])
    seen = []
    for result in run.results or []:
        (location,) = result.locations or []
        artifact = location.physical_location.artifact_location
        assert artifact.uri_base_id == "%SRCROOT%"
        assert artifact.uri.startswith("my%20engine/")
        path = resolve(log, location)
        assert path.is_file()
        region = location.physical_location.region
        seen.append(
            [
                f"{path.relative_to(engine)}:{region.start_line}:{region.start_column}",
                result.rule_id,
                result.message.text,
            ]
        )
        assert run.tool.driver.rules[result.rule_index].id == result.rule_id
    assert seen == expected
    assert len(seen) == 3


def test_paths_outside_the_working_directory_are_file_uris(engine: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sarif = run_check(elsewhere, "--format", "sarif", str(engine / "my engine"))
    log = validate(sarif.stdout)
    results = log.runs[0].results or []
    assert len(results) == 3
    for result in results:
        (location,) = result.locations or []
        assert location.physical_location.artifact_location.uri_base_id is None
        assert resolve(log, location).is_file()


def test_the_validator_rejects_what_a_consumer_would(engine: Path) -> None:
    good = json.loads(run_check(engine, "--format", "sarif", "my engine").stdout)
    validate(json.dumps(good))

    misspelt = json.loads(json.dumps(good))
    result = misspelt["runs"][0]["results"][0]
    result["ruleID"] = result.pop("ruleId")
    with pytest.raises(AssertionError):
        validate(json.dumps(misspelt))

    wrong_type = json.loads(json.dumps(good))
    region = wrong_type["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    region["startLine"] = "one hundred"
    with pytest.raises(ValidationError):
        validate(json.dumps(wrong_type))
