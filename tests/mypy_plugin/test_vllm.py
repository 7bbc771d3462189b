"""The plugin on real vLLM releases (wheels from the package index, cached).

vLLM is not installed: mypy reads ``vllm/worker`` and follows its imports silently
(third-party packages missing, so torch and friends are ``Any``). The run must not
crash or report an internal error, and what the plugin reports is compared exactly.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.mypy_plugin.mypy_run import expected, mypy, normalise
from tests.vllm_wheels import vllm_package

PLUGIN_CODES = re.compile(
    r"\[(runner-input-protocol|from-dict-fixed-return|runner-input-covariance|"
    r"execute-input-mismatch|unbroadcastable-value|runnercheck-internal|runner-input-unbound)\]$"
)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.parametrize("version", ["0.5.0", "0.5.1", "0.6.0", "0.6.3"])
def test_vllm_worker(tmp_path: Path, version: str) -> None:
    package = vllm_package(version)
    (tmp_path / "mypy.ini").write_text("[mypy]\nplugins = mypy_plugin\n")
    proc = mypy(
        tmp_path,
        "--no-site-packages",
        "--ignore-missing-imports",
        "--follow-imports=silent",
        str(package / "worker"),
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stderr == ""
    assert "INTERNAL ERROR" not in proc.stdout and "[runnercheck-internal]" not in proc.stdout
    reported = [
        line
        for line in normalise(proc.stdout, package.parent).splitlines()
        if PLUGIN_CODES.search(line)
    ]
    assert reported == expected(f"vllm-{version}-worker.txt").splitlines()
