"""The one walker (``runnercheck.files``): what it yields, what it reports, what it never
does (block on a FIFO, read without bound, follow a directory link)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from runnercheck.errors import UsageError
from runnercheck.files import JOURNAL_NAME, ReadError, read_source, walk


def names(paths: list[Path], root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in paths]


def test_read_source_reads_regular_files_only_and_within_the_limit(tmp_path: Path) -> None:
    good = tmp_path / "a.py"
    good.write_bytes(b"x = 1\n")
    assert read_source(good) == b"x = 1\n"
    fifo = tmp_path / "f.py"
    os.mkfifo(fifo)
    with pytest.raises(ReadError) as info:
        read_source(fifo)  # would block forever if opened for a plain read
    assert (info.value.kind, str(info.value)) == ("special", "a FIFO, not a regular file: not read")
    with pytest.raises(ReadError) as info:
        read_source("/dev/zero")
    assert info.value.kind == "special" and "character device" in str(info.value)
    with pytest.raises(ReadError) as info:
        read_source(good, limit=3)
    assert str(info.value) == "6 bytes, more than max_file_size (3): not read"
    loop = tmp_path / "loop.py"
    loop.symlink_to("loop.py")
    with pytest.raises(ReadError) as info:
        read_source(loop)
    assert (info.value.kind, str(info.value)) == ("link-loop", "symbolic link loop: not read")


def test_walk_order_skips_and_suffixes(tmp_path: Path) -> None:
    for name in ["b.py", "a.py", "sub/z.py", "sub/deep/y.py", "c.pyi", "notes.txt"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    for skipped in [".git/x.py", "__pycache__/x.py", "pkg.egg-info/x.py", ".hidden/x.py"]:
        (tmp_path / skipped).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / skipped).write_text("")
    found = walk([tmp_path], suffixes=(".py", ".pyi"))
    shown = names([s.path for s in found.files], tmp_path)
    assert shown == ["a.py", "b.py", "c.pyi", ".hidden/x.py", "sub/z.py", "sub/deep/y.py"]
    hidden_skipped = walk([tmp_path], skip_hidden=True)
    assert names([s.path for s in hidden_skipped.files], tmp_path) == [
        "a.py",
        "b.py",
        "sub/z.py",
        "sub/deep/y.py",
    ]
    excluded = walk([tmp_path], exclude=["sub/*"], root=tmp_path)
    assert names([s.path for s in excluded.files], tmp_path) == ["a.py", "b.py", ".hidden/x.py"]


def test_links_are_read_or_reported_never_descended(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "real.py").write_text("")
    (root / "alias.py").symlink_to("real.py")
    outside = tmp_path / "outside.py"
    outside.write_text("")
    (root / "out.py").symlink_to(outside)
    (root / "again").symlink_to(".", target_is_directory=True)
    (root / "dangling.py").symlink_to("missing.py")
    read = walk([root], links="read")
    # alias.py and real.py are one file: listed once, under the name met first
    assert names([s.path for s in read.files], root) == ["alias.py", "out.py"]
    assert [(p.display.rsplit("/", 1)[1], p.kind, p.hides_source) for p in read.problems] == [
        ("dangling.py", "broken-link", True)
    ]
    inside = walk([root], links="inside")
    assert names([s.path for s in inside.files], root) == ["real.py"]
    assert sorted((p.path.name, p.kind) for p in inside.problems) == [
        ("dangling.py", "broken-link"),
        ("out.py", "link-outside"),
    ]


def test_special_files_are_notes_and_explicit_ones_hide_source(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.py")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock.py"))
    server.close()
    (tmp_path / "loop.py").symlink_to("loop.py")
    found = walk([tmp_path])
    assert found.files == []
    assert [(p.path.name, p.kind, p.hides_source) for p in found.problems] == [
        ("fifo.py", "special", False),
        ("loop.py", "link-loop", False),
        ("sock.py", "special", False),
    ]
    explicit = walk([tmp_path / "fifo.py", tmp_path / "loop.py"])
    assert [(p.kind, p.hides_source, p.message) for p in explicit.problems] == [
        ("special", True, "a FIFO, not a regular file: not read"),
        ("link-loop", True, "symbolic link loop: not read"),
    ]


def test_journals_are_recorded_and_never_walked_into(tmp_path: Path) -> None:
    journal = tmp_path / JOURNAL_NAME
    (journal / "new").mkdir(parents=True)
    (journal / "new" / "0.py").write_text("")
    (tmp_path / f"{JOURNAL_NAME}.12.new").mkdir()
    found = walk([tmp_path])
    assert found.files == [] and found.problems == []
    assert found.journals == [journal]


def test_a_missing_argument_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file or directory"):
        walk([tmp_path / "missing"])


def test_a_file_too_large_to_parse_is_one_line_in_check_and_migrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Parsing costs about 200 times a file's size in memory: a file over the bound that
    mentions the contract is reported, not parsed; one under it and one that does not
    mention the contract are as before. (The memory itself: benchmarks/soak_migrate.py.)"""
    from runnercheck.cli import main
    from runnercheck.files import MAX_ANALYSED_SIZE

    body = b"def f_%d(x):\n    return broadcast_tensor_dict(x)\n\n"
    big = tmp_path / "big.py"
    lines, size = [], 0
    while size <= MAX_ANALYSED_SIZE:
        line = body % len(lines)
        lines.append(line)
        size += len(line)
    big.write_bytes(b"".join(lines))
    small = tmp_path / "small.py"
    small.write_bytes(b"".join(lines[:100]))
    other = tmp_path / "other.py"
    other.write_bytes(b"x = 1\n" * (MAX_ANALYSED_SIZE // 6 + 10))
    reason = f"{size} bytes, more than runnercheck parses ({MAX_ANALYSED_SIZE}"
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    found = [line for line in out.splitlines() if " RC001 " in line]
    assert len(found) == 1 and found[0].startswith(f"{big}:1:1: RC001 {reason}"), out
    assert main(["migrate", "--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    found = [line for line in out.splitlines() if " RC001 " in line]
    assert len(found) == 1 and found[0].startswith(f"{big}: RC001 [parse] {reason}"), out


def test_paths_are_pathlib_joins_and_real_paths_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk joins ``str`` paths and resolves a directory from its parent: what it
    hands out is what ``Path(argument) / name`` and ``os.path.realpath`` give, whatever
    the form of the argument (relative, ``./``, trailing ``/``, ``..``, through a link)."""
    tree = tmp_path / "real" / "tree"
    for name in ["a.py", "sub/b.py", "sub/deep/c.py", "sub/deep/deeper/d.py", "z/e.py"]:
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text("")
    (tmp_path / "via").symlink_to(tmp_path / "real", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    relative = ["a.py", "sub/b.py", "sub/deep/c.py", "sub/deep/deeper/d.py", "z/e.py"]
    arguments = ["real/tree", "./real/tree/", "via/tree", "via//tree/../tree", str(tree)]
    for argument in arguments:
        found = walk([argument])
        assert [s.path for s in found.files] == [Path(argument) / r for r in relative]
        assert [s.display for s in found.files] == [str(Path(argument) / r) for r in relative]
        assert [s.real for s in found.files] == [tree / r for r in relative]
        assert all(s.real == Path(os.path.realpath(s.path)) for s in found.files)
    monkeypatch.chdir(tree / "sub")
    found = walk(["."])
    assert [s.display for s in found.files] == ["b.py", "deep/c.py", "deep/deeper/d.py"]
    assert [s.real for s in found.files] == [tree / r for r in relative[1:4]]
    # a file given beside its directory is one file, listed once
    again = walk([tree / "a.py", tree])
    assert [s.real for s in again.files] == [tree / r for r in relative]
