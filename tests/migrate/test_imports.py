"""Import edits splice only the statements concerned: the text they produce is what
printing the whole edited module would give."""

from __future__ import annotations

import libcst as cst
import pytest

from codemods.toolkit import imports

SOURCES = [
    '"""doc"""\n# c\nfrom a import (x,\n               y)\n# about b\nfrom b import z\n'
    "import os\n\n\ndef f():\n    return y + os.sep\n",
    "from a import x, y\nfrom b import z\n\nz2 = 1\n",
    "# -*- coding: utf-8 -*-\nfrom a import x\r\nfrom b import z\r\n\r\nq = z\r\n",
]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("names", [{"x"}, {"z"}, {"x", "z"}, {"x", "y"}, set()])
def test_remove_names_splices_exactly_what_printing_gives(source: str, names: set[str]) -> None:
    module = cst.parse_module(source)
    new, code = imports.remove_names(module, module.code, names)
    assert code == new.code
    for name in names:
        assert name not in imports.imported_names(new)


def test_add_imports_extends_an_existing_list_in_order() -> None:
    module = cst.parse_module("import os\nfrom typing import Dict, List\n\nx = 1\n")
    new = imports.add_imports(module, ["dataclasses"], [("typing", ["Any", "Type"])])
    assert new.code == (
        "import dataclasses\nimport os\nfrom typing import Any, Dict, List, Type\n\nx = 1\n"
    )
