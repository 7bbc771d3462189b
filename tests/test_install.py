"""runnercheck installed each way the README documents, each in a virtual environment of
its own, run from outside the repository.

* The base install (docs/examples/github-actions.yml's ``pip install "runnercheck @
  git+...@COMMIT"`` with this checkout and its HEAD, or ``pip install .`` of the sources
  where there is no git history; real dependencies from the package index) holds the
  static tools: ``check`` and ``migrate`` work, torch is absent, and ``fuzz``,
  ``demo`` and ``trace`` say in one line which extra to install.
* The demo works under a compat editable install, a standard (PEP 660) editable install
  and a plain wheel install. These environments reuse this environment's dependencies
  (a path entry to links of them, runnercheck itself left out) so that only runnercheck
  is installed, in the mode under test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from runnercheck.demo.engine import engine_source_dir

REPO = Path(__file__).resolve().parent.parent
SITE = Path(sysconfig.get_paths()["purelib"])
IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", ".*_cache", "build", "dist", "*.egg-info", ".cache"
)
FUZZ_LINE = (
    "runnercheck: error: runnercheck {what} needs the fuzz extra "
    "({absent} not installed): pip install 'runnercheck[fuzz]'"
)


def run(
    cmd: list[str], cwd: Path, timeout: float = 600, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "NO_COLOR": "1", **env},
    )


def ok(proc: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def pip(venv: Path, *args: str) -> None:
    """This environment's pip, installing into ``venv``."""
    ok(run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *args], venv))


def venv_site(venv: Path) -> Path:
    out = ok(
        run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            venv,
        )
    ).stdout
    return Path(out.strip())


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project's sources (what git does not ignore, where there is git), so
    that builds leave nothing in the repository."""
    copy = tmp_path_factory.mktemp("src") / "runnercheck"
    listed = run(["git", "ls-files", "-co", "--exclude-standard", "-z"], REPO)
    if listed.returncode != 0:
        shutil.copytree(REPO, copy, ignore=IGNORE, symlinks=True)
        return copy
    for name in filter(None, listed.stdout.split("\0")):
        source_file = REPO / name
        if source_file.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source_file, copy / name)
    return copy


def ci_example_requirement() -> str:
    """The CI example's requirement, naming this checkout and its HEAD commit."""
    text = (REPO / "docs" / "examples" / "github-actions.yml").read_text(encoding="utf-8")
    (template,) = re.findall(r'RUNNERCHECK: "([^"]+)"', text)
    assert 'pip install "$RUNNERCHECK"' in text
    head = ok(run(["git", "rev-parse", "HEAD"], REPO)).stdout.strip()
    requirement = template.replace("RUNNERCHECK_REPO", REPO.as_uri()).replace(
        "RUNNERCHECK_COMMIT", head
    )
    assert requirement == f"runnercheck @ git+{REPO.as_uri()}@{head}"
    return requirement


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory, source: Path) -> Path:
    venv = tmp_path_factory.mktemp("base") / "venv"
    ok(run([sys.executable, "-m", "venv", "--without-pip", str(venv)], venv.parent))
    has_history = (REPO / ".git").exists() and shutil.which("git") is not None
    pip(venv, "install", "--quiet", ci_example_requirement() if has_history else str(source))
    return venv


@pytest.fixture
def legacy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(
        engine_source_dir("legacy"),
        project / "engine",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return project


@pytest.mark.slow
def test_base_install_has_the_static_tools_and_no_torch(
    base_venv: Path, legacy_project: Path
) -> None:
    python = str(base_venv / "bin" / "python")
    for name in ("torch", "numpy", "hypothesis"):
        probe = run([python, "-c", f"import {name}"], legacy_project)
        assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr
    for name in ("mypy", "libcst", "pydantic", "rich", "typing_extensions"):
        ok(run([python, "-c", f"import {name}"], legacy_project))

    helper = run(
        [python, "-c", "from runnercheck.testing import assert_roundtrip; assert_roundtrip(int)"],
        legacy_project,
    )
    assert helper.returncode == 1
    assert helper.stderr.splitlines()[-1] == (
        "runnercheck.extras.MissingExtraError: runnercheck.testing.assert_roundtrip needs the "
        "fuzz extra (torch, numpy, hypothesis not installed): pip install 'runnercheck[fuzz]'"
    )

    tool = str(base_venv / "bin" / "runnercheck")
    check = run([tool, "check", "engine"], legacy_project)
    assert check.returncode == 1, check.stderr
    assert check.stdout.count(": RC106 ") == 3
    migrate = run([tool, "migrate", "--check", "engine"], legacy_project)
    assert migrate.returncode == 1, migrate.stderr
    assert "merge-broadcasts" in migrate.stdout and "Traceback" not in migrate.stderr

    # check's start-up loads none of the heavy packages (plain text, JSON and SARIF)
    for fmt in ("text", "json", "sarif"):
        timed = run(
            [python, "-X", "importtime", "-m", "runnercheck", "check", "--format", fmt, "engine"],
            legacy_project,
        )
        assert timed.returncode == 1
        modules = {
            line.split("|")[-1].strip()
            for line in timed.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert "runnercheck.check.pipeline" in modules
        heavy = {m.split(".")[0] for m in modules} & {"rich", "pydantic", "libcst", "mypy"}
        assert heavy == set(), fmt


@pytest.mark.slow
def test_an_engine_with_packages_named_as_runnercheck_s_keeps_its_own(
    base_venv: Path, legacy_project: Path
) -> None:
    """runnercheck installs three top-level packages (``runnercheck``, ``codemods``,
    ``mypy_plugin``). An engine whose root holds its own ``codemods`` and
    ``mypy_plugin`` still imports its own, and runnercheck's commands still run their
    own, from the engine's root and with that root on ``PYTHONPATH``."""
    for name in ("codemods", "mypy_plugin"):
        (legacy_project / name).mkdir()
        (legacy_project / name / "__init__.py").write_text(f'OWNER = "engine {name}"\n')
    python = str(base_venv / "bin" / "python")
    probe = "import codemods, mypy_plugin; print(codemods.OWNER, mypy_plugin.OWNER)"
    mine = ok(run([python, "-c", probe], legacy_project))
    assert mine.stdout.split() == ["engine", "codemods", "engine", "mypy_plugin"]
    tool = str(base_venv / "bin" / "runnercheck")
    (legacy_project / "mypy.ini").write_text("[mypy]\nplugins = mypy_plugin\n")
    for env in ({}, {"PYTHONPATH": str(legacy_project)}):
        for command in ([tool], [python, "-m", "runnercheck"]):
            migrate = run([*command, "migrate", "--check", "engine"], legacy_project, **env)
            assert migrate.returncode == 1 and "merge-broadcasts" in migrate.stdout, (
                migrate.stdout + migrate.stderr
            )
        gate = run([tool, "mypy", "--follow-imports=skip", "engine"], legacy_project, **env)
        assert gate.returncode == 0 and "no contract errors" in gate.stdout, (
            gate.stdout + gate.stderr
        )


COMMANDS_NEEDING_THE_EXTRA = {
    "fuzz": (["fuzz", "engine/model_runner.py"], "torch, numpy, hypothesis"),
    "demo": (["demo"], "torch, numpy, hypothesis"),
    "trace": (["trace", "--", "python", "-c", "pass"], "torch"),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS_NEEDING_THE_EXTRA))
def test_commands_that_need_torch_name_the_extra_without_it(
    base_venv: Path, legacy_project: Path, command: str
) -> None:
    args, absent = COMMANDS_NEEDING_THE_EXTRA[command]
    proc = run([str(base_venv / "bin" / "runnercheck"), *args], legacy_project)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [FUZZ_LINE.format(what=command, absent=absent)]


@pytest.fixture(scope="module")
def borrowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Links to this environment's installed packages, runnercheck's own entries left out."""
    links = tmp_path_factory.mktemp("borrowed")
    for entry in SITE.iterdir():
        name = entry.name
        if name.startswith(("runnercheck", "__editable__")) or name.endswith(".pth"):
            continue
        (links / name).symlink_to(entry)
    return links


def mode_venv(root: Path, borrowed: Path) -> Path:
    venv = root / "venv"
    ok(run([sys.executable, "-m", "venv", "--without-pip", str(venv)], root))
    (venv_site(venv) / "borrowed.pth").write_text(f"{borrowed}\n", encoding="utf-8")
    return venv


STAGES_UP_TO_MYPY = """
import tempfile
from pathlib import Path
from runnercheck.demo import story
with tempfile.TemporaryDirectory() as tmp:
    ws = story.prepare_workspace(Path(tmp))
    for stage in (story.stage_check, story.stage_migrate, story.stage_mypy):
        result = stage(ws, story.DemoOptions())
        print(f"{result.name}:{result.ok}")
        if not result.ok:
            print(result.details)
"""

MODES = {
    "compat-editable": ["--config-settings", "editable_mode=compat", "-e"],
    "pep660-editable": ["-e"],
    "wheel": [],
}


@pytest.mark.slow(seconds=40)
@pytest.mark.parametrize("mode", list(MODES))
def test_demo_under_each_install_mode(
    mode: str, tmp_path: Path, source: Path, borrowed: Path
) -> None:
    venv = mode_venv(tmp_path, borrowed)
    python = str(venv / "bin" / "python")
    ok(
        run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                *MODES[mode],
                str(source),
            ],
            tmp_path,
        )
    )
    site = venv_site(venv)
    where = Path(
        ok(
            run([python, "-c", "import runnercheck; print(runnercheck.__file__)"], tmp_path)
        ).stdout.strip()
    )
    if mode == "wheel":
        assert where.parent == site / "runnercheck"
        assert (site / "runnercheck" / "demo" / "engine" / "legacy" / "worker.py").is_file()
    else:
        # a path entry that static tools follow, not an import hook they cannot see, and
        # that holds this project's packages only, never the repository root
        links = source / "build" / "__editable__.runnercheck-links"
        (pth,) = site.glob("__editable__*runnercheck*.pth")
        assert pth.read_text(encoding="utf-8").strip() == str(links)
        assert not list(site.glob("__editable__*finder*.py"))
        assert sorted(p.name for p in links.iterdir()) == ["codemods", "mypy_plugin", "runnercheck"]
        assert where.parent == links / "runnercheck"
        assert where.resolve().parent == source / "runnercheck"
    # only the packages are importable: not the repository's tests/ or benchmarks/
    for name in ("tests", "benchmarks", "build_backend"):
        probe = run([python, "-c", f"import {name}"], tmp_path)
        assert probe.returncode == 1 and "ModuleNotFoundError" in probe.stderr, name
    # and mypy, run with this environment's Python, finds the packages (and only them)
    (tmp_path / "use.py").write_text(
        "import codemods\nimport mypy_plugin\nfrom runnercheck.catalog import get\n"
        "reveal_type(get)\nimport tests\n",
        encoding="utf-8",
    )
    found = run(
        [python, "-m", "mypy", "--no-incremental", "--python-executable", python, "use.py"],
        tmp_path,
    )
    lines = [line for line in found.stdout.splitlines() if line.startswith("use.py:")]
    revealed = (
        'use.py:4: note: Revealed type is "def (code_or_name: str) -> runnercheck.catalog.Rule"'
    )
    assert lines[0] == revealed, found.stdout
    assert [line.split(":")[1] for line in lines if ": error:" in line] == ["5"], found.stdout

    if mode != "wheel":
        # the stage an editable mode can break: mypy must find the engine's modules
        # (the full demo runs in the development environment, a PEP 660 editable install)
        stages = ok(run([python, "-c", STAGES_UP_TO_MYPY], tmp_path)).stdout.split()
        assert stages == ["check:True", "migrate:True", "mypy:True"], stages
        return
    demo = run(
        [str(venv / "bin" / "runnercheck"), "demo", "--json", "--steps", "4", "--repeats", "1",
         "--examples", "3"],
        tmp_path,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout + demo.stderr
    report = json.loads(demo.stdout)
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert list(stages) == ["check", "migrate", "recheck", "mypy", "fuzz", "engines"]
    assert all(stage["ok"] for stage in stages.values()), demo.stdout
    assert stages["mypy"]["details"]["errors"] == []


def fake_torch_index(root: Path) -> str:
    """A package index that serves one torch wheel, versioned 2.13.0+cpu.fake: a later
    version than any real 2.13.0 build, so pip takes it only from this index."""
    version = "2.13.0+cpu.fake"
    wheel = root / f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f'__version__ = "{version}"\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        record = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
        archive.writestr(f"{info}/RECORD", record)
    page = root / "simple" / "torch" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<a href="{wheel.as_uri()}">{wheel.name}</a>\n', encoding="utf-8")
    return (root / "simple").as_uri() + "/"


@pytest.mark.slow
def test_setup_takes_torch_from_runnercheck_torch_index(tmp_path: Path, borrowed: Path) -> None:
    """scripts/setup.sh with RUNNERCHECK_TORCH_INDEX installs torch from that index (the
    rest is already there: this environment's packages, torch left out)."""
    no_torch = tmp_path / "borrowed"
    no_torch.mkdir()
    for link in borrowed.iterdir():
        if not link.name.startswith("torch"):
            (no_torch / link.name).symlink_to(link.resolve())
    venv = mode_venv(tmp_path, no_torch)
    index = fake_torch_index(tmp_path)
    setup = run(
        ["bash", str(REPO / "scripts" / "setup.sh")],
        tmp_path,
        RUNNERCHECK_VENV=str(venv),
        RUNNERCHECK_TORCH_INDEX=index,
    )
    assert setup.returncode == 0, setup.stdout + setup.stderr
    python = str(venv / "bin" / "python")
    probe = "import importlib.metadata as m, torch; print(m.version('torch'), torch.__file__)"
    version, where = ok(run([python, "-c", probe], tmp_path)).stdout.split()
    assert version == "2.13.0+cpu.fake"
    assert Path(where).is_relative_to(venv)
    tool = ok(run([python, "-c", "import runnercheck; print(runnercheck.__file__)"], tmp_path))
    assert Path(tool.stdout.strip()).resolve() == REPO / "runnercheck" / "__init__.py"


@pytest.mark.slow
def test_setup_if_needed_skips_an_up_to_date_environment(
    tmp_path: Path, source: Path, borrowed: Path
) -> None:
    """scripts/test.sh runs `setup.sh --if-needed`: a fresh environment is set up, an
    up-to-date one is left alone, and a change to constraints.txt sets it up again."""
    assert "bash scripts/setup.sh --if-needed" in (REPO / "scripts" / "test.sh").read_text()
    clone = tmp_path / "clone"
    shutil.copytree(source, clone, ignore=IGNORE)
    venv = mode_venv(tmp_path, borrowed)
    stamp = venv / ".runnercheck-setup"

    def setup() -> str:
        proc = run(["bash", "scripts/setup.sh", "--if-needed"], clone, RUNNERCHECK_VENV=str(venv))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    first = setup()
    assert "up to date" not in first and stamp.is_file()
    probe = "import runnercheck; print(runnercheck.__file__)"
    assert (
        clone in Path(ok(run([str(venv / "bin" / "python"), "-c", probe], tmp_path)).stdout).parents
    )
    written = stamp.read_text()
    assert setup().splitlines() == [f"setup: {venv} is up to date (delete {stamp} to set up again)"]
    with (clone / "constraints.txt").open("a", encoding="utf-8") as f:
        f.write("# a changed pin\n")
    again = setup()
    assert "up to date" not in again and stamp.read_text() != written
