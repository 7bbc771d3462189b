"""Comments the migration makes untrue, rewritten or removed with the code they describe.

After the merge a step sends one broadcast, and the legacy input method is gone, so in
the lines the migration wrote (those of the new text that are not lines of the old):

* a comment that counts broadcasts or describes one that no longer happens ("it sends
  2 broadcasts", "the additional broadcast costs 300us", "decode attn_metadata is
  broadcasted separately") goes, with the rest of its comment block (the lines after
  it explain it);
* a comment that says to broadcast ("# Broadcast the metadata.") in a function that
  now sends nothing (``prepare_model_input``) goes the same way;
* every comment of the file that names a removed method names its replacement
  (``prepare_input_tensors`` -> ``prepare_model_input``).

Only comments are touched (read with :mod:`tokenize`, never text inside a string);
docstrings and code stay as written.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Mapping

from codemods.toolkit.formatting import changed_ranges

#: a broadcast counted, or one that is extra, separate or costed
_STALE = re.compile(
    r"\b(?:\d+|two|three|single|additional|extra|second|separate|another)\s+broadcasts?\b"
    r"|\bbroadcast(?:ed|s)?\s+(?:separately|twice|again)\b"
    r"|\bbroadcasts?\s+of\s+(?:its|their)\s+own\b"
    r"|\b(?:sends?|triggers?|costs?|needs?)\b[^.]*\bbroadcasts\b"
    r"|\bbroadcasts?\b[^.]*\bcosts?\b",
    re.IGNORECASE,
)
#: a comment that says to broadcast ("Broadcast the metadata.")
_IMPERATIVE = re.compile(r"^#+\s*broadcast\b", re.IGNORECASE)
#: a call that sends or receives (the function still communicates)
_SENDS = re.compile(r"\bbroadcast\w*\s*\(")


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, column, text) of each comment of ``text``; none when it does not tokenize."""
    found: list[tuple[int, int, str]] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                found.append((token.start[0], token.start[1], token.string))
    except (tokenize.TokenError, SyntaxError):
        return []
    return found


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _function_sends(lines: list[str], number: int) -> bool:
    """Whether the function around line ``number`` (1-based) calls a broadcast (True
    at module level, or in ``as_broadcastable_tensor_dict``: what it builds is sent)."""
    here = _indent(lines[number - 1])
    start = None
    for index in range(number - 2, -1, -1):
        line = lines[index]
        if (
            line.strip()
            and _indent(line) < here
            and line.lstrip().startswith(("def ", "async def "))
        ):
            start = index
            break
    if start is None:
        return True
    if "as_broadcastable_tensor_dict" in lines[start]:
        return True
    top = _indent(lines[start])
    for line in lines[start + 1 :]:
        if line.strip() and _indent(line) <= top and not line.lstrip().startswith(("#", ")")):
            break
        if _SENDS.search(line.split("#", 1)[0]):
            return True
    return False


def refresh(old: str, new: str, renames: Mapping[str, str]) -> str:
    """``new`` with the stale comments of the lines it does not share with ``old``
    removed, and removed methods renamed in every comment (``renames``: old method
    name -> new)."""
    comments = _comments(new)
    if not comments:
        return new
    lines = new.splitlines(keepends=True)
    changed = {n for a, b in changed_ranges(old, new) for n in range(a, b + 1)}
    own = {n: c for n, col, c in comments if not lines[n - 1][:col].strip()}
    drop: set[int] = set()
    number = 1
    while number <= len(lines):
        if number not in own:
            number += 1
            continue
        block = [number]
        while block[-1] + 1 in own:
            block.append(block[-1] + 1)
        number = block[-1] + 1
        for position, line_no in enumerate(block):
            if line_no not in changed:
                continue
            text = own[line_no]
            following = own.get(line_no + 1, "").lstrip("#").strip()
            joined = f"{text} {following}" if line_no + 1 in own else text
            # (a sentence that goes on in the next line counts; one that starts there
            # is that line's)
            match = _STALE.search(joined)
            stale = match is not None and match.start() < len(text)
            if not stale and _IMPERATIVE.match(text):
                stale = not _function_sends([ln.rstrip("\n") for ln in lines], line_no)
            if stale:
                drop.update(block[position:])
                break
    out: list[str] = []
    words = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b") if renames else None
    trailing = {n: (col, c) for n, col, c in comments if n not in own}
    for index, line in enumerate(lines, 1):
        if index in drop:
            continue
        if words is not None and (index in own or index in trailing):
            col = trailing[index][0] if index in trailing else _indent(line)
            head, comment = line[:col], line[col:]
            line = head + words.sub(lambda m: renames[m.group(1)], comment)
        out.append(line)
    return "".join(out)
