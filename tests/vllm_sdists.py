"""A vLLM release's own lint and type configuration and its tests, from its sdist.

The source distribution of a release holds the files of the repository at the
release's tag that ``migrate`` is judged against: ``pyproject.toml`` (ruff, mypy,
and yapf when configured there), ``setup.cfg`` and ``tests/``. They are downloaded
at run time from the package index and unpacked into a cache directory
(``$RUNNERCHECK_VLLM_CACHE/sdist`` or ``~/.cache/runnercheck/vllm/sdist``), next to
the wheels of :mod:`tests.vllm_wheels`. Nothing of vLLM is ever committed.
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tests.vllm_wheels import cache_root, cached

#: the configuration files looked for at the top of the sdist
CONFIG_FILES = (
    "pyproject.toml",
    "setup.cfg",
    ".style.yapf",
    "requirements-lint.txt",
    "requirements-dev.txt",
)


def sdist_root(version: str) -> Path:
    """A directory with that release's configuration files and ``tests/``
    (downloaded once, then cached). Raises RuntimeError when it cannot be had."""
    return cached(cache_root() / "sdist" / version, version, _download)


def _sdist_url(version: str) -> str:
    """The sdist's address, from the index's project page (PEP 691 JSON)."""
    for entry in _project().get("files", []):
        if entry.get("filename") == f"vllm-{version}.tar.gz":
            return str(entry["url"])
    raise RuntimeError(f"vllm=={version} has no source distribution on the package index")


def index_versions() -> list[str]:
    """Every release with a source distribution on the package index."""
    prefix, suffix = "vllm-", ".tar.gz"
    names = [str(e.get("filename", "")) for e in _project()["files"]]
    return [
        n[len(prefix) : -len(suffix)] for n in names if n.startswith(prefix) and n.endswith(suffix)
    ]


def package_from_sdist(version: str) -> Path:
    """The directory holding ``vllm/`` of that release, taken from its sdist (for
    releases without a wheel for this Python), in the same cache as the wheels'."""
    return cached(cache_root() / version, version, _download_package)


def _project() -> dict[str, list[dict[str, object]]]:
    request = urllib.request.Request(
        "https://pypi.org/simple/vllm/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        project: dict[str, list[dict[str, object]]] = json.load(r)
    return project


def _download_package(version: str, target: Path) -> None:
    _unpack(version, target, lambda rest: rest.startswith("vllm/") and rest.endswith(".py"))


def _download(version: str, target: Path) -> None:
    _unpack(
        version,
        target,
        lambda rest: rest in CONFIG_FILES or (rest.startswith("tests/") and rest.endswith(".py")),
    )


def _unpack(version: str, target: Path, wanted: Callable[[str], bool]) -> None:
    try:
        url = _sdist_url(version)
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "sdist.tar.gz"
            with urllib.request.urlopen(url, timeout=300) as r, archive.open("wb") as out:
                shutil.copyfileobj(r, out)
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    head, _, rest = member.name.partition("/")
                    if not member.isfile() or not head.startswith("vllm-"):
                        continue
                    if wanted(rest):
                        dest = target / rest
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        source = tar.extractfile(member)
                        assert source is not None
                        dest.write_bytes(source.read())
    except OSError as exc:
        raise RuntimeError(f"cannot download the sdist of vllm=={version}: {exc}") from exc


def release_config(version: str) -> dict[str, str]:
    """File name -> text of the release's configuration files that exist."""
    root = sdist_root(version)
    return {n: (root / n).read_text() for n in CONFIG_FILES if (root / n).is_file()}


if __name__ == "__main__":
    for v in sys.argv[1:]:
        print(sdist_root(v), sorted(release_config(v)))
