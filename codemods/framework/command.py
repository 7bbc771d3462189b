"""The single-file LibCST commands (``python -m libcst.tool codemod``): their base and the
commands of the single-class codemods, which hand each file to the codemod's
``rewrite_module``. They import LibCST's codemod framework (and its matchers), which
``migrate`` itself never needs: the codemod modules name their command lazily."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from codemods import driver_only, self_return, super_dict
from codemods.framework import registry
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


class SelfReturnCommand(ContractCommand):
    """``from_broadcasted_tensor_dict`` -> ``Self`` or a cls-bound TypeVar; ``X(...)`` -> ``cls(...)``."""

    DESCRIPTION = registry.SELF_RETURN.summary

    NEEDLE = "from_dict_method"

    def rewrite(self, tree: cst.Module) -> cst.Module:
        new, _changed = self_return.rewrite_module(tree, self.contract)
        return new


class DriverOnlyCommand(ContractCommand):
    """Declare unbroadcast input dataclass fields driver-only (a comment above each)."""

    DESCRIPTION = registry.DRIVER_ONLY.summary

    def rewrite(self, tree: cst.Module) -> cst.Module:
        path, project = self.project(tree)
        new, _changed, skipped = driver_only.rewrite_module(tree, project, path, self.contract)
        self.warn_skipped(skipped)
        return new


class SuperDictCommand(ContractCommand):
    """A subclass's broadcast dict that re-lists its parent's keys calls ``super()``."""

    DESCRIPTION = registry.SUPER_DICT.summary

    def rewrite(self, tree: cst.Module) -> cst.Module:
        path, project = self.project(tree)
        new, _changed, skipped = super_dict.rewrite_module(tree, project, path, self.contract)
        self.warn_skipped(skipped)
        return new
