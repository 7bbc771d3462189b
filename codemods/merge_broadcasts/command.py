"""The ``merge-broadcasts`` LibCST command for a file that holds a whole group."""

from __future__ import annotations

import os
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from codemods.facts.groups import find_groups
from codemods.framework import registry
from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts import templates
from codemods.merge_broadcasts.rewrite import finish, merge
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from runnercheck.contract import VLLM, Contract

NAME = registry.MERGE_BROADCASTS.name


class MergeBroadcastsCommand(VisitorBasedCodemodCommand):
    """Merge a worker's and its runners' broadcasts into one, in a single file.

    Groups whose runners live in other files are skipped here; ``runnercheck
    migrate`` plans those across files."""

    DESCRIPTION = registry.MERGE_BROADCASTS.summary

    def __init__(self, context: CodemodContext, contract: Contract = VLLM) -> None:
        super().__init__(context)
        self.contract = contract

    def transform_module(self, tree: cst.Module) -> cst.Module:
        path = Path(os.path.abspath(self.context.filename or "module.py"))
        project = self._project(path, tree.code)
        groups, _notes = find_groups(project)
        if not groups:
            raise SkipFile("no paired broadcast")
        modules = {path: tree}
        for group in groups:
            if any(f != path for f in group.files):
                self.warn(f"{group.label}: spans several files; use `runnercheck migrate`")
                continue
            try:
                result = merge(group, modules, project, self.contract)
            except Refusal as refusal:
                self.warn(f"{refusal.code} {refusal.message}")
                continue
            if result.created:
                self.warn(
                    f"{group.label}: needs a new {templates.BASE_MODULE_NAME}.py; "
                    "use `runnercheck migrate`"
                )
                continue
            tree, _, _ = finish(path, result.modules[path], result.used_before[path])
            modules = {path: tree}
            project = self._project(path, tree.code)
        return tree

    def _project(self, path: Path, code: str) -> Project:
        return Project([extract_source(code, str(path), self.contract, names=True)], self.contract)
