"""``exclude``: the compiled matcher answers what matching each glob in turn answered,
on every shape of glob, and takes hundreds of thousands of globs."""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from runnercheck.files import excluded, walk


def one_by_one(display: str, relative: str, patterns: Sequence[str]) -> bool:
    """``files.excluded`` as it was: every glob matched in turn (the reference)."""
    parts = Path(display).parts
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(display, pattern) or fnmatch.fnmatch(relative, pattern):
            return True
        if "/" not in pattern and any(fnmatch.fnmatch(part, pattern) for part in parts):
            return True
        if fnmatch.fnmatch(display, f"{pattern}/*") or fnmatch.fnmatch(relative, f"{pattern}/*"):
            return True
    return False


#: Globs of every shape: literal names and paths, a leading, trailing or inner star, sets
#: (ranges, negation, a ``]`` first, unclosed), trailing slashes, the empty glob and ``/``.
SHAPES = [
    "tests",
    "tests/",
    "tests/*",
    "pkg/mod.py",
    "mod.py",
    "*.pyi",
    "*_pb2.py",
    "*/fixtures/*",
    "*fix*",
    "build*",
    "b?ild",
    "[bt]*",
    "[!t]ests",
    "[]]x",
    "[a-c]/*",
    "a[b",
    "a[",
    "[",
    "[!]",
    "**",
    "*",
    "?",
    "",
    "/",
    "/abs/*",
    "./pkg",
    "pkg//mod.py",
    "a\\b",
    "x[&~|]y",
    "nul\x00*",
]
PATHS = [
    ("tests/a.py", "tests/a.py"),
    ("pkg/mod.py", "pkg/mod.py"),
    ("src/pkg/mod.py", "pkg/mod.py"),
    ("/abs/pkg/x_pb2.py", "/abs/pkg/x_pb2.py"),
    ("a/fixtures/b.py", "a/fixtures/b.py"),
    ("build/x.py", "../build/x.py"),
    ("./pkg/x.py", "pkg/x.py"),
    ("b/x.py", "b/x.py"),
    ("]x/y.py", "]x/y.py"),
    ("a[b/c.py", "a[b/c.py"),
    ("a\\b/c.py", "a\\b/c.py"),
    ("x&y.py", "x&y.py"),
    ("mod.py", "mod.py"),
    (".", "."),
    ("t/ests", "t/ests"),
]


@pytest.mark.parametrize("pattern", SHAPES)
def test_each_shape_matches_as_fnmatch_one_by_one(pattern: str) -> None:
    from runnercheck.excludes import Excludes

    matcher = Excludes([pattern])
    for display, relative in PATHS:
        expected = one_by_one(display, relative, [pattern])
        assert matcher(display, relative) is expected, (pattern, display, relative)
        assert excluded(display, relative, [pattern]) is expected


def test_random_lists_match_as_fnmatch_one_by_one() -> None:
    from runnercheck.excludes import Excludes

    rng = random.Random(39)
    alphabet = "ab/.*?[]!-^\\\x00"
    names = "ab/."
    for _ in range(3_000):
        patterns = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
            for _ in range(rng.randint(1, 6))
        ]
        matcher = Excludes(patterns)
        for _ in range(8):
            display = "".join(rng.choice(names) for _ in range(rng.randint(1, 8)))
            relative = rng.choice(
                [display, "".join(rng.choice(names) for _ in range(rng.randint(1, 8)))]
            )
            expected = one_by_one(display, relative, patterns)
            assert matcher(display, relative) is expected, (patterns, display, relative)


def test_no_patterns_match_nothing() -> None:
    from runnercheck.excludes import Excludes

    assert not Excludes([])
    assert not Excludes([])("a.py", "a.py")
    assert Excludes(["x"])


def many_patterns(count: int) -> list[str]:
    """``count`` globs of the shapes a generated exclude list has, none of which match
    the tree of :func:`tree`."""
    shapes = ("gen{}/*", "*_{}.py", "pkg/mod{}.py", "*/tmp{}/*", "x{}", "?{}[0-9]*", "*{}*z")
    return [shapes[i % len(shapes)].format(1_000_000 + i) for i in range(count)]


def tree(root: Path) -> list[str]:
    names = [
        "pkg/mod1.py",
        "pkg/mod2.py",
        "pkg/sub/a.py",
        "pkg/sub/b.py",
        "gen/x.py",
        "gen7/y.py",
        "tools/run_5.py",
        "tools/keep.py",
        "docs/conf.py",
        "x3/z.py",
    ]
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x = 1\n")
    return names


def test_two_hundred_thousand_patterns_exclude_what_they_name(tmp_path: Path) -> None:
    """(Matched one by one, 20,000 globs took 56 s on 10 files, 200,000 did not end.)"""
    names = tree(tmp_path)
    patterns = many_patterns(200_000)
    assert not any(one_by_one(name, name, patterns[:2_000]) for name in names)
    found = walk([tmp_path], exclude=patterns, root=tmp_path).files
    assert sorted(f.real.relative_to(tmp_path).as_posix() for f in found) == sorted(names)
    # gen7/* (a glob), pkg/sub (a directory), *_5.py, x3 (a name), docs/conf.py (a path)
    named = ["gen7/*", "pkg/sub", "*_5.py", "x3", "docs/conf.py"]
    for index, extra in zip(range(1_000, 200_000, 40_000), named, strict=True):
        patterns[index] = extra
    found = walk([tmp_path], exclude=patterns, root=tmp_path).files
    kept = sorted(f.real.relative_to(tmp_path).as_posix() for f in found)
    assert kept == ["gen/x.py", "pkg/mod1.py", "pkg/mod2.py", "tools/keep.py"]
    assert kept == sorted(name for name in names if not one_by_one(name, name, named))
