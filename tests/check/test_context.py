"""Context beyond the given paths: a plugin's classes derive from an engine outside
them. The engine's modules are read (never imported) from ``--context``, ``context``
in the config, or the installed packages; findings are reported for the given paths
only."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runnercheck.check import check_paths
from runnercheck.config import Config
from tests.check.conftest import FIXTURES, REPO, CliResult

CASE = FIXTURES / "context"
PLUGIN = (CASE / "plugin").relative_to(REPO).as_posix()
ENGINE = (CASE / "engine").relative_to(REPO).as_posix()
UNREAD = (FIXTURES / "unread-engine").relative_to(REPO).as_posix()


def codes(result: CliResult) -> list[str]:
    """The codes of the findings printed, errors and notes."""
    return [re.search(r":\d+:\d+:(?: note:)? (\w+) ", line)[1] for line in result.finding_lines]  # type: ignore[index]


def test_without_the_engine_what_rests_on_its_worker_base_is_a_note(
    run: Callable[..., CliResult],
) -> None:
    """Without the engine, the field its worker input delivers looks undelivered
    (RC103) and its worker base's abstract methods are guessed (RC107): neither can be
    known, so both are notes, and one line names the package and how to provide it."""
    result = run("--show-notes", "--no-cache", PLUGIN)
    assert result.code == 0
    assert sorted(codes(result)) == ["RC103", "RC107"]
    assert all(": note: " in line for line in result.finding_lines)
    assert all("LocalOrDistributedWorkerBase of accel_engine" in f for f in result.finding_lines)
    [line] = result.err.splitlines()
    assert line.startswith("accel_engine was not read")
    assert "2 findings rest on its LocalOrDistributedWorkerBase" in line
    assert "--context PATH" in line and "install accel_engine" in line


def test_a_plugin_on_an_absent_vllm(run: Callable[..., CliResult]) -> None:
    """A plugin whose worker derives from vLLM's ``LocalOrDistributedWorkerBase``,
    checked where vllm is neither given nor installed: the field that base's worker
    input delivers is a note (RC103), the input's own key that its constructor rejects
    stays an error (RC102: its own code decides it), and one line says what to give."""
    result = run("--show-notes", "--no-cache", UNREAD)
    assert result.code == 1
    errors = [line for line in result.finding_lines if ": note: " not in line]
    notes = [line for line in result.finding_lines if ": note: " in line]
    assert [e.split(": ")[1].split()[0] for e in errors] == ["RC102"]
    assert [n.split(": ")[2].split()[0] for n in notes] == ["RC103"]
    assert "NPUWorker derives from LocalOrDistributedWorkerBase of vllm" in notes[0]
    [line] = result.err.splitlines()
    assert line.startswith("vllm was not read") and "install vllm" in line
    as_json = run("--format", "json", "--no-cache", UNREAD)
    assert json.loads(as_json.out)["unread"] == [line]


def test_context_path_reads_the_engine_and_reports_only_the_plugin(
    run: Callable[..., CliResult],
) -> None:
    result = run("--show-notes", "--context", ENGINE, PLUGIN)
    # the engine's worker input delivers virtual_engine; the engine's own extra
    # broadcast is not in the given paths, so it is not reported
    assert result.finding_lines == []
    assert "1 imported file read for context" in result.summary
    assert result.code == 0


def test_context_given_as_the_package_itself(run: Callable[..., CliResult]) -> None:
    # ``--context site-packages/accel_engine`` means the directory holding it
    result = run("--context", f"{ENGINE}/accel_engine", PLUGIN)
    assert result.finding_lines == []
    assert "1 imported file read for context" in result.summary


def test_context_from_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = check_paths([PLUGIN], Config(context=(ENGINE,)), root=REPO)
    assert [f.code for f in result.findings] == []


def test_installed_package_is_found_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [*sys.path, str(REPO / ENGINE)])
    result = check_paths([PLUGIN])
    assert [f.code for f in result.findings] == []
    assert "accel_engine" not in sys.modules


def test_a_context_that_is_not_a_directory_is_a_usage_error(
    run: Callable[..., CliResult],
) -> None:
    result = run("--context", "no/such/dir", PLUGIN)
    assert result.code == 2
    assert result.err.strip().endswith("--context no/such/dir: not a directory")
    assert "Traceback" not in result.err


_ENGINE_BASE = """\
from abc import ABC, abstractmethod

from engine.distributed import broadcast_tensor_dict


class WorkerBase(ABC):
    @abstractmethod
    def execute_model(self, execute_model_req=None): ...


class LocalOrDistributedWorkerBase(WorkerBase):
    def execute_model(self, execute_model_req=None):
        if self.is_driver_worker:
            model_input = self.model_runner.prepare_model_input(execute_model_req)
            broadcast_tensor_dict(model_input.as_broadcastable_tensor_dict(), src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            model_input = self.model_runner.make_model_input_from_broadcasted_tensor_dict(data)
        return self.model_runner.execute_model(model_input, None)
"""

_PLUGIN_V1 = """\
from engine.worker.worker_base import WorkerBase


class NPUModelRunner:
    def prepare_model_input(self, scheduler_output):
        return scheduler_output

    def execute_model(self, scheduler_output):
        return self.model(self.prepare_model_input(scheduler_output))


class NPUWorker(WorkerBase):
    def __init__(self):
        self.model_runner = NPUModelRunner()

    def execute_model(self, scheduler_output=None):
        return self.model_runner.execute_model(scheduler_output)
"""


def test_a_v1_worker_is_off_the_contract_once_context_resolves_its_base(
    tmp_path: Path, run: Callable[..., CliResult]
) -> None:
    """A plugin's V1 worker derives from the engine's ``WorkerBase``: once ``--context``
    resolves that base, the worker calls its runner's ``execute_model`` with the
    scheduler output and the runner prepares its own input on every rank. Neither
    broadcasts: no RC003 half-applied migration, without the engine or with it."""
    engine = tmp_path / "engine_src"
    (engine / "engine" / "worker").mkdir(parents=True)
    for package in (engine / "engine", engine / "engine" / "worker"):
        (package / "__init__.py").write_text("")
    (engine / "engine" / "worker" / "worker_base.py").write_text(_ENGINE_BASE)
    plugin = tmp_path / "plugin" / "npu_plugin"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text("")
    (plugin / "worker_v1.py").write_text(_PLUGIN_V1)
    for context in ((), ("--context", str(engine))):
        result = run("--show-notes", "--no-cache", *context, str(plugin))
        assert result.finding_lines == [], context
        assert result.code == 0
