"""The base of the single-file LibCST commands (``python -m libcst.tool codemod``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from runnercheck.contract import VLLM, Contract


class ContractCommand(VisitorBasedCodemodCommand):
    """Holds the contract's names; skips a file that never mentions ``NEEDLE`` (the name
    of a :class:`Contract` field) and hands the others to :meth:`rewrite`."""

    NEEDLE = "as_dict_method"

    def __init__(self, context: CodemodContext, contract: Contract = VLLM) -> None:
        super().__init__(context)
        self.contract = contract

    def transform_module(self, tree: cst.Module) -> cst.Module:
        needle = getattr(self.contract, self.NEEDLE)
        if needle not in tree.code:
            raise SkipFile(f"no {needle}")
        return self.rewrite(tree)

    def rewrite(self, tree: cst.Module) -> cst.Module:
        raise NotImplementedError

    def project(self, tree: cst.Module) -> tuple[str, Project]:
        """The file's path and the analysis of its text alone (what a single-file
        command can see)."""
        path = os.path.abspath(self.context.filename or "module.py")
        return path, Project([extract_source(tree.code, path, self.contract)], self.contract)

    def warn_skipped(self, skipped: Iterable[Any]) -> None:
        """Each item the rewrite left alone (``.code``, ``.message``) as a codemod warning."""
        for item in skipped:
            self.warn(f"{item.code} {item.message}")
