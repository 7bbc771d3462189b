"""runnercheck's build backend: setuptools', with an editable install that puts only
runnercheck's packages on the path.

The packages sit at the top of the repository, beside ``tests/`` and ``benchmarks/``.
setuptools' editable install (lenient and compat modes) then adds the repository root
to ``sys.path``, so ``import tests`` or ``import benchmarks`` would find this project's
folders from any environment runnercheck is installed in, and can shadow an engine's
own ``tests`` package. Here the editable wheel's path entry names a generated folder
instead, ``build/__editable__.runnercheck-links/``, holding one link per package
(``runnercheck``, ``mypy_plugin``, ``codemods``) to its folder in the repository: a
static path entry that mypy and other static tools follow, and new modules are seen
without reinstalling. ``editable_mode=strict`` (setuptools' file-by-file link tree) is
left as setuptools makes it; so is every non-editable build. Where links cannot be made
the wheel is left as setuptools made it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools  # type: ignore[import-untyped]

# every hook but build_editable as setuptools has it
from setuptools.build_meta import *  # type: ignore[import-untyped]  # noqa: F403

LINKS = Path("build") / "__editable__.runnercheck-links"


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, str | list[str]] | None = None,
    metadata_directory: str | None = None,
) -> str:
    name = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    mode = (config_settings or {}).get("editable_mode", "lenient")
    if mode in ("lenient", "compat"):
        _point_at_links(Path(wheel_directory) / name)
    return name


def _packages(archive: zipfile.ZipFile) -> list[str]:
    (top_level,) = [n for n in archive.namelist() if n.endswith(".dist-info/top_level.txt")]
    return [line.strip() for line in archive.read(top_level).decode().splitlines() if line.strip()]


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _point_at_links(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        paths = [n for n in names if n.startswith("__editable__") and n.endswith(".pth")]
        if len(paths) != 1:
            return  # not a path entry (an import hook): nothing to narrow
        (pth,) = paths
        root = Path(archive.read(pth).decode().strip())
        if not (root / "pyproject.toml").is_file():
            return
        packages = [p for p in _packages(archive) if (root / p / "__init__.py").is_file()]
        links = root / LINKS
        if not _make_links(links, root, packages):
            return
        new_pth = f"{links}\n".encode()
        with tempfile.NamedTemporaryFile(dir=wheel.parent, delete=False) as tmp:
            rewritten = Path(tmp.name)
        with zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as out:
            for info in archive.infolist():
                data = archive.read(info)
                if info.filename == pth:
                    data = new_pth
                elif info.filename.endswith(".dist-info/RECORD"):
                    lines = [
                        _record_line(pth, new_pth) if line.startswith(f"{pth},") else line
                        for line in data.decode().splitlines()
                    ]
                    data = ("\n".join(lines) + "\n").encode()
                out.writestr(info, data)
    os.replace(rewritten, wheel)


def _make_links(links: Path, root: Path, packages: list[str]) -> bool:
    """A fresh folder of links, one per package, made beside and then swapped in."""
    staging = links.with_name(links.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        for package in packages:
            (staging / package).symlink_to(root / package, target_is_directory=True)
    except OSError:  # no symbolic links here: keep setuptools' path entry
        shutil.rmtree(staging, ignore_errors=True)
        return False
    shutil.rmtree(links, ignore_errors=True)
    os.replace(staging, links)
    return True
