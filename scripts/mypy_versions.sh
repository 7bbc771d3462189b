#!/usr/bin/env bash
# The mypy plugin's own test cases under several mypy releases, installed from the package
# index: one virtual environment per release with that mypy, runnercheck's other static
# dependencies (pyproject.toml) and runnercheck itself (editable, --no-deps), then
# scripts/mypy_versions.py in each, one release after the other.
#
#   bash scripts/mypy_versions.sh                  the default releases below
#   bash scripts/mypy_versions.sh 1.13.0 2.0.0     these
#
# The default releases: the lowest the plugin supports (vLLM 0.5 pinned 1.9.0), the pin
# of the maintained vLLM forks (1.11.1), one in between and the newest. Keep them in step
# with the mypy range of pyproject.toml and mypy_plugin/version.py.
#
#   RUNNERCHECK_MYPY_VENVS  where the environments and the wheels they are installed from
#                           are kept (default .cache/mypy-versions); an environment is
#                           made again only when pyproject.toml, the build backend, this
#                           script or the Python changes
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
DEFAULT_VERSIONS=(1.9.0 1.11.1 1.15.0 2.4.1)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("${DEFAULT_VERSIONS[@]}")
root="${RUNNERCHECK_MYPY_VENVS:-.cache/mypy-versions}"
wheels="$root/wheels"
mkdir -p "$wheels"
# the interpreter of the project's environment (scripts/setup.sh), whose pip installs
# into the others (pip --python): they need no pip of their own
pip=(.venv/bin/python -m pip)
python="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
mapfile -t deps < <("$python" - <<'PY'
import tomllib
with open("pyproject.toml", "rb") as f:
    for dep in tomllib.load(f)["project"]["dependencies"]:
        if not dep.replace("_", "-").lower().startswith("mypy"):
            print(dep)
PY
)
# the editable install is built without isolation, by the setuptools of the environment
backend="setuptools>=77"
stamp_of() {
  "$python" - "$1" <<'PY'
import hashlib, sys
digest = hashlib.sha256(sys.argv[1].encode() + sys.version.encode())
for name in ("pyproject.toml", "build_backend/runnercheck_build.py", "scripts/mypy_versions.sh"):
    with open(name, "rb") as f:
        digest.update(name.encode() + b"\0" + f.read())
print(digest.hexdigest())
PY
}

setup() {
  local version="$1" venv="$2" wanted
  wanted="$(stamp_of "$version")"
  if [ -f "$venv/.runnercheck-stamp" ] && [ "$(cat "$venv/.runnercheck-stamp")" = "$wanted" ] \
    && "$venv/bin/python" -c "import mypy_plugin, mypy" 2>/dev/null; then
    return
  fi
  rm -rf "$venv"
  "$python" -m venv --without-pip "$venv"
  local wanted_packages=("mypy==$version" "${deps[@]}" "$backend")
  # from the wheels kept here when they are all there, else from the index (kept then);
  # not byte-compiled (most of mypy is compiled already; that alone took 7 of 10 s)
  if ! "${pip[@]}" --python "$venv/bin/python" install -q --no-compile --no-index --find-links "$wheels" \
    "${wanted_packages[@]}" 2>/dev/null; then
    "${pip[@]}" download -q -d "$wheels" "${wanted_packages[@]}"
    "${pip[@]}" --python "$venv/bin/python" install -q --no-compile --no-index --find-links "$wheels" \
      "${wanted_packages[@]}"
  fi
  "${pip[@]}" --python "$venv/bin/python" install -q --no-compile --no-index --no-build-isolation --no-deps -e .
  echo "$wanted" > "$venv/.runnercheck-stamp"
}

start=$SECONDS
failed=()
for version in "${versions[@]}"; do
  begun=$SECONDS
  venv="$root/mypy-$version"
  setup "$version" "$venv"
  echo "mypy $version: environment ready ($((SECONDS - begun)) s)"
  if ! "$venv/bin/python" scripts/mypy_versions.py; then
    failed+=("$version")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "mypy_versions: FAILED under mypy ${failed[*]} ($((SECONDS - start)) s in all)"
  exit 1
fi
echo "mypy_versions: the plugin's cases as under the newest mypy with mypy ${versions[*]} ($((SECONDS - start)) s in all)"
