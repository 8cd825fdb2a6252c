"""The FME Package's sample workspace: FairIntake, FairProcessor and FairCompensator, each after
a Creator, with both ports of each connected to a Logger, so no rejected feature can end the
job (docs/fme-flow.md, the FME Package).

It is written in the shape FME 2025.0.3 saves (:mod:`.fmw`), each packaged transformer as a
saved workspace holds one (``kix_pyTest_2025.1.1``'s packaged Python transformers: the header's
``TRANSFORMER`` with the form's parameters as ``XFORM_PARM`` lines, the mapping its
``executionTemplate`` expanded). The transformers' parameters keep the form's defaults: the
ledger URL (and WS-02's Vision AI endpoint) are filled in after opening it. FME has not
opened this file: if Workbench refuses it, the help pages say how to build it by hand.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Mapping, Sequence, Tuple

from .fmw import (_CREATOR_BRANCH_TARGET, _SEPARATOR, _creator_block, _creator_node, _Graph,
                  _header, _Link, _logger_block, _logger_node, _mapping_head, _mapping_tail,
                  _Node)
from .fmw_encoding import encode_fme
from .fmxj import fmxj
from .fpkg import TRANSFORMERS, Transformer, fq_name

__all__ = ["render_sample", "SAMPLE_NAME"]

SAMPLE_NAME = "fme-ai-resilience-sample"
_REJECTED = "rejected: @Value(fme_rejection_code) @Value(fme_rejection_message)"


@dataclass(frozen=True)
class _Spec:
    """What :func:`~.fmw._header` and :func:`~.fmw._logger_block` read of a workspace."""

    name: str
    parameters: Tuple[()] = ()


Attributes = Mapping[str, Sequence[str]]


def _transformer_node(t: Transformer, identifier: int, y: int, order: int,
                      created: Tuple[str, ...], exposed: Attributes) -> _Node:
    definition = fmxj(t, exposed[t.workspace])
    version = definition["versions"][0]
    attributes = created + tuple(exposed[t.workspace])
    rejected = attributes + ("fme_rejection_code", "fme_rejection_message")
    parms = [(p["name"], str(p.get("defaultValue", "")))
             for p in version["form"]["parameters"][1]["parameters"]]
    parms += [("PARAMETERS_GROUP", ""), ("TRANSFORMER_GROUP", ""), ("XFORMER_NAME", t.name)]
    return _Node(identifier, fq_name(t), str(version["version"]), t.name, (700, y), order,
                 (("Output", attributes), ("<Rejected>", rejected)), tuple(parms))


def _graph(exposed: Attributes) -> Tuple[_Graph, List[Tuple[_Node, _Node, _Node, _Node, _Link]]]:
    graph, rows, ident, order = _Graph(), [], 2, 500000000000001
    for row, t in enumerate(TRANSFORMERS):
        y = row * 600
        created = ("_creation_instance",)
        creator = _creator_node(ident, "Creator" if row == 0 else f"Creator_{row + 1}",
                                (0, y), order, created)
        node = _transformer_node(t, ident + 1, y, order + 1, created, exposed)
        output = _logger_node(ident + 2, f"{t.name}_Logger", (1400, y - 150),
                              node.outputs[0][1], f"{t.name} output", "INFO", order + 2)
        reject = _logger_node(ident + 3, f"{t.name}_Rejected", (1400, y + 150),
                              node.outputs[1][1], _REJECTED, "ERROR", order + 3)
        links = [_Link(ident + 4, creator, 0, node), _Link(ident + 5, node, 0, output),
                 _Link(ident + 6, node, 1, reject)]
        graph.nodes += [creator, node, output, reject]
        graph.links += links
        rows.append((creator, node, output, reject, links[0]))
        ident, order = ident + 7, order + 4
    return graph, rows


def _expanded(node: _Node, t: Transformer, upstream: str) -> List[str]:
    """The transformer's ``executionTemplate`` with its macros filled in, one factory a line."""
    template = fmxj(t, ())["versions"][0]["executionTemplate"]
    values = "     ".join(f"{name} {_value(value)}" for name, value in node.parms
                          if name.startswith("___XF_"))
    macros = {"$(XFORMER_NAME)": node.xformer_name,
              "$(INPUT_LINES)": f"INPUT  FEATURE_TYPE {upstream}",
              "$(FME_PARM_VAL_LIST)": values,
              "$(OUTPUT_Output_FTYPE)": f"{node.xformer_name}_Output",
              "$(OUTPUT_<Rejected>_FTYPE)": f"{node.xformer_name}_<Rejected>",
              "$(OUTPUT_Output_FUNCS)": "", "$(OUTPUT_<Rejected>_FUNCS)": ""}
    factories: List[List[str]] = []
    for line in template:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        for macro, value in macros.items():
            stripped = stripped.replace(macro, value)
        if stripped.startswith("FACTORY_DEF"):
            factories.append([stripped])
        elif stripped:
            factories[-1].append(stripped)
    return ["    ".join(f) for f in factories]


def _value(value: str) -> str:
    return f'"{encode_fme(value)}"' if value else '""'


def render_sample(exposed: Attributes) -> str:
    """The sample workspace's text (UTF-8, LF, a final newline); the same bytes every time.
    ``exposed`` gives, per workspace (``WS-02_processor``), the attributes its transformer
    sets, shown on both ports (the callers' ``WORKSPACE_ATTRIBUTES``)."""
    spec = _Spec(SAMPLE_NAME)
    graph, rows = _graph(exposed)
    lines = _header(spec, graph) + ["#! </WORKSPACE>", ""] + _mapping_head(())
    for creator, _node, _out, _rej, link in rows:
        lines += _creator_block(creator, link)
        lines.append(_SEPARATOR)
    lines += [_CREATOR_BRANCH_TARGET, _SEPARATOR]
    for (creator, node, output, reject, _link), t in zip(rows, TRANSFORMERS):
        lines += _expanded(node, t, f"{creator.xformer_name}_CREATED")
        lines.append(_SEPARATOR)
        for logger, port, severity in ((output, 0, "INFO"), (reject, 1, "ERROR")):
            lines += _logger_block(spec, logger, node, port, severity)  # type: ignore[arg-type]
            lines.append(_SEPARATOR)
    return "\n".join(lines + _mapping_tail()) + "\n"


def transformers_in(text: str) -> Sequence[str]:
    """The packaged transformers a sample's header names (for checks)."""
    return re.findall(r'#!   TYPE="(fair\.fme-ai-resilience\.[A-Za-z]+)"', text)
