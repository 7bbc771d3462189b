"""The shipped pre-commit hooks, through real `pre-commit`, with the configuration of
docs/examples/pre-commit-config.yaml (this checkout as the repository, its HEAD as the
commit), on a repository holding the legacy engine: they fail with the findings, and
pass once `runnercheck migrate` ran. The hook environment has no torch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.demo.engine import engine_source_dir

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXAMPLE = REPO / "docs" / "examples" / "pre-commit-config.yaml"


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


@pytest.mark.slow(seconds=170)
def test_hooks_fail_on_legacy_and_pass_after_migrate(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("the hooks are installed from this checkout's git history; no .git here")
    rev = git(REPO, "rev-parse", "HEAD")
    project = tmp_path / "project"
    project.mkdir()
    shutil.copytree(
        engine_source_dir("legacy"),
        project / "engine",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    example = EXAMPLE.read_text(encoding="utf-8")
    assert example.count("RUNNERCHECK_REPO") == 2 and example.count("RUNNERCHECK_COMMIT") == 2
    config = example.replace("repo: RUNNERCHECK_REPO", f"repo: {REPO}").replace(
        "rev: RUNNERCHECK_COMMIT", f"rev: {rev}"
    )
    (project / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
    # the local mypy hook reads the README's configuration
    (project / "mypy.ini").write_text("[mypy]\nplugins = mypy_plugin\n", encoding="utf-8")
    # the engine's own mypy errors (not the contract's): the mypy hook leaves them alone
    (project / "engine" / "util.py").write_text(
        'import dependency_not_installed  # noqa\n\nSTEPS: int = "four"\n', encoding="utf-8"
    )
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "legacy engine")
    env = {
        **os.environ,
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        # the local mypy hook runs in the development environment (`language: system`)
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
        "NO_COLOR": "1",
    }

    def run_hooks(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(BIN / "pre-commit"), "run", *(args or ("--all-files",))],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )

    before = run_hooks()
    assert before.returncode == 1, before.stdout + before.stderr
    (hook_python,) = (tmp_path / "pre-commit-home").glob("repo*/py_env-*/bin/python")
    no_torch = subprocess.run(
        [str(hook_python), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert no_torch.stdout.strip() == "None", no_torch.stdout + no_torch.stderr
    assert "runnercheck check....." in before.stdout
    assert before.stdout.count(": RC106 ") == 3
    assert "Found 3 findings in 3 files" in before.stdout
    assert "runnercheck migrate --check" in before.stdout
    assert "mypy (with the runnercheck plugin)" in before.stdout

    # the mypy hook gates on the contract's codes only: the engine's own errors pass
    mypy_hook = before.stdout[before.stdout.index("mypy (with the runnercheck plugin)") :]
    assert mypy_hook.split("\n", 1)[0].endswith("Passed"), mypy_hook
    util = run_hooks("runnercheck-mypy", "--verbose", "--files", "engine/util.py")
    assert util.returncode == 0, util.stdout + util.stderr
    assert "runnercheck mypy: no contract errors; 2 other mypy errors not gating" in util.stdout

    # on single files, as pre-commit passes what is staged: each file's whole group is
    # judged from its package on disk; nothing asks for the directory
    one = run_hooks("runnercheck-migrate", "--files", "engine/cpu_model_runner.py")
    assert one.returncode == 1, one.stdout + one.stderr
    assert "MIG108" not in one.stdout and "directory" not in one.stdout, one.stdout
    named = {line for line in one.stdout.splitlines() if line.startswith("would ")}
    assert named == {
        "would migrate engine/cpu_model_runner.py",
        "would migrate engine/cpu_worker.py",
        "would create engine/model_runner_base.py",
        "would create engine/worker_input.py",
    }, one.stdout

    def migrate(*paths: str) -> None:
        proc = subprocess.run(
            [str(BIN / "runnercheck"), "migrate", *paths],
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr  # 0: a clean write

    migrate("engine/cpu_worker.py")  # that file's group only
    git(project, "add", "-A")
    done = run_hooks("runnercheck-migrate", "--files", "engine/cpu_model_runner.py")
    assert done.returncode == 0, done.stdout + done.stderr
    rest = run_hooks("runnercheck-migrate", "--files", "engine/worker.py")
    assert rest.returncode == 1 and "would migrate engine/worker.py" in rest.stdout, rest.stdout

    migrate("engine")
    git(project, "add", "-A")

    after = run_hooks()
    assert after.returncode == 0, after.stdout + after.stderr
    assert "runnercheck check" in after.stdout and "Passed" in after.stdout
    assert "Failed" not in after.stdout
    assert after.stdout.count("Passed") == 3
