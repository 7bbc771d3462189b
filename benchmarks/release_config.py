"""A vLLM release's lint and type configuration, its tests and its tool pins, as the
repository held them at the release's tag.

The source is a git repository that holds vLLM's release tags (``v0.5.0``, ...): a
clone of vLLM or of a fork that kept upstream's tags (``--mirror`` directories
``<mirror>/<owner>+<name>/repo``, bare or not). A tag counts only when its
``vllm/worker/`` is byte for byte the released wheel's, so a fork's own commit under
an upstream tag name is never taken for the release.

From the tag: ``pyproject.toml``, ``setup.cfg``, ``mypy.ini``, ``.style.yapf``, the
lint requirements (``requirements-lint.txt`` or ``requirements-dev.txt``) and
``tests/``. The formatter and type-checker pins named there (``yapf``, ``toml``,
``mypy``) are installed once into a tool environment under
``~/.cache/runnercheck/tools`` from the package index, so each release is judged by
the versions its own ``format.sh`` asked for.
"""

from __future__ import annotations

import io
import re
import subprocess
import tarfile
import venv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.vllm_wheels import cache_root

#: the configuration files taken from the tag when present
CONFIG = (
    "pyproject.toml",
    "setup.cfg",
    "mypy.ini",
    ".style.yapf",
    "requirements-lint.txt",
    "requirements-dev.txt",
)
#: the tools whose pins decide the judgement
TOOLS = ("yapf", "toml", "mypy")
_PIN = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;#]+)", re.MULTILINE)


@dataclass(frozen=True)
class Tagged:
    """A release's tag in one repository."""

    repo: Path
    tag: str
    commit: str

    def label(self) -> str:
        return f"{self.repo.parent.name}@{self.tag} ({self.commit[:10]})"


def _git(repo: Path, *args: str, text: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", f"--git-dir={repo}", *args], capture_output=True, text=text, timeout=300
    )


def _git_dir(path: Path) -> Path | None:
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    if (path / ".git").is_dir():
        return path / ".git"
    return None


def repositories(mirror: Path) -> Iterator[Path]:
    """Git directories under the mirror (``<owner>+<name>/repo``)."""
    for candidate in sorted(mirror.glob("*/repo")):
        git_dir = _git_dir(candidate)
        if git_dir is not None:
            yield git_dir


def _blob_text(repo: Path, ref: str, path: str) -> str | None:
    proc = _git(repo, "show", f"{ref}:{path}")
    return proc.stdout if proc.returncode == 0 else None


def find_tag(version: str, package: Path, mirror: Path) -> Tagged | None:
    """The first repository whose tag ``v<version>`` holds the released
    ``vllm/worker/`` (the wheel's, at ``package/worker``) unchanged."""
    tag = f"v{version}"
    released = {p.name: p.read_text() for p in sorted((package / "worker").glob("*.py"))}
    for repo in repositories(mirror):
        proc = _git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}")
        if proc.returncode != 0:
            continue
        commit = proc.stdout.strip()
        listed = _git(repo, "ls-tree", "--name-only", f"{commit}:vllm/worker")
        names = {n for n in listed.stdout.split() if n.endswith(".py")}
        if listed.returncode != 0 or names != set(released):
            continue
        if all(_blob_text(repo, commit, f"vllm/worker/{n}") == t for n, t in released.items()):
            return Tagged(repo, tag, commit)
    return None


def lay_out(tagged: Tagged, root: Path) -> list[str]:
    """Write the tag's configuration files and ``tests/`` into ``root``; the names
    of the configuration files written."""
    listed = _git(tagged.repo, "ls-tree", "--name-only", tagged.commit)
    present = set(listed.stdout.split())
    names = [n for n in CONFIG if n in present]
    paths = names + (["tests"] if "tests" in present else [])
    archive = _git(tagged.repo, "archive", "--format=tar", tagged.commit, *paths, text=False)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {tagged.label()}: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(root, filter="data")
    return names


def pins(root: Path) -> dict[str, str]:
    """The versions the lint requirements pin for the tools that judge the diff."""
    found: dict[str, str] = {}
    for name in ("requirements-lint.txt", "requirements-dev.txt"):
        path = root / name
        if path.is_file():
            for match in _PIN.finditer(path.read_text()):
                key = match.group(1).lower()
                if key in TOOLS:
                    found.setdefault(key, match.group(2))
    return found


def tool_python(requirements: dict[str, str]) -> Path:
    """A Python with exactly those pins installed (made once, then cached)."""
    spec = sorted(f"{k}=={v}" for k, v in requirements.items())
    env = cache_root().parent / "tools" / "-".join(s.replace("==", "-") for s in spec)
    python = env / "bin" / "python"
    done = env / ".installed"
    if not done.is_file():
        venv.EnvBuilder(with_pip=True, clear=True).create(env)
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *spec],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"installing {' '.join(spec)}: {proc.stderr.strip()[-400:]}")
        done.write_text("\n".join(spec) + "\n")
    return python
