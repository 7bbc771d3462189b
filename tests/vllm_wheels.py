"""Real vLLM sources for tests and benchmarks, from the wheels on the package index.

The wheels are downloaded at run time (``pip download``), and only ``vllm/**.py``
is unpacked, into a cache directory (``$RUNNERCHECK_VLLM_CACHE`` or
``~/.cache/runnercheck/vllm``). Nothing of vLLM is ever committed.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

VERSIONS = ("0.5.0", "0.5.1", "0.6.0")


def cache_root() -> Path:
    env = os.environ.get("RUNNERCHECK_VLLM_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "runnercheck" / "vllm"


def vllm_source(version: str) -> Path:
    """The directory holding ``vllm/`` of that release (downloaded once, then cached).

    Raises RuntimeError when the wheel cannot be downloaded."""
    return cached(cache_root() / version, version, _download)


def cached(target: Path, version: str, download: Callable[[str, Path], None]) -> Path:
    """``target``, filled by ``download(version, target)`` once: test processes
    running side by side download a release once, one at a time."""
    done = target / ".complete"
    if done.is_file():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            download(version, target)
            done.write_text(version)
    return target


def _download(version: str, target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--platform",
            "manylinux1_x86_64",
            "--python-version",
            "3.11",
            "-d",
            tmp,
            f"vllm=={version}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        wheels = list(Path(tmp).glob("vllm-*.whl"))
        if proc.returncode != 0 or not wheels:
            raise RuntimeError(f"cannot download vllm=={version}: {proc.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as archive:
            for name in archive.namelist():
                if name.startswith("vllm/") and name.endswith(".py"):
                    archive.extract(name, target)


def vllm_package(version: str) -> Path:
    """``.../vllm`` of that release."""
    return vllm_source(version) / "vllm"


if __name__ == "__main__":
    for v in sys.argv[1:] or VERSIONS:
        print(vllm_package(v))
