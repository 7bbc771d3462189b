"""GitHub Actions workflow commands (``--format github``): one annotation a line.

``::error file=PATH,line=L,col=C,title=TITLE::MESSAGE`` (``warning``, ``notice``):
GitHub shows each on the line it names in a pull request's diff. As the runner reads
them, the message escapes ``%``, CR and LF (``%25``, ``%0D``, ``%0A``); a property
value also escapes ``:`` and ``,`` (``%3A``, ``%2C``), which end a value.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["error", "warning", "notice"]


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: Level, message: str, path: str = "", line: int = 0, col: int = 0, title: str = ""
) -> str:
    """One workflow command; a property that is empty or 0 is left out."""
    properties = []
    if path:
        properties.append(f"file={escape_property(path)}")
    if line > 0:
        properties.append(f"line={line}")
    if col > 0:
        properties.append(f"col={col}")
    if title:
        properties.append(f"title={escape_property(title)}")
    head = f"::{level} {','.join(properties)}" if properties else f"::{level}"
    return f"{head}::{escape_data(message)}"
