"""The stage runner reads on its own: it is handed its collaborators explicitly and never
reaches into the processor."""
from __future__ import annotations

import ast
import inspect

from fme_ai_resilience.services.processing import collaborators, processor, task_run


def _tree(module):
    return ast.parse(inspect.getsource(module))


def test_the_stage_runner_never_imports_the_processor():
    """task_run imports nothing from services.processor, not even for type checking."""
    imported = {node.module for node in ast.walk(_tree(task_run))
                if isinstance(node, ast.ImportFrom)}
    assert "processor" not in imported and not any(
        (m or "").endswith(".processor") for m in imported)


def test_the_stage_runner_reads_no_private_field_of_what_it_is_handed():
    """No ``p._token``-style access: every collaborator is a public field of one value."""
    private = [f"{node.value.id}.{node.attr}" for node in ast.walk(_tree(task_run))
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
               and node.value.id == "p" and node.attr.startswith("_")]
    assert private == []


def test_the_processor_hands_over_one_frozen_value():
    """The processor builds the collaborators once; the run gets them, not the processor."""
    source = inspect.getsource(processor.Processor._work)
    assert "TaskRun(self.collaborators, task, lease)" in source
    fields = set(collaborators.Collaborators.__dataclass_fields__)
    assert {"store", "clock", "sink", "download", "token", "lister", "routes"} <= fields
    assert collaborators.Collaborators.__dataclass_params__.frozen
