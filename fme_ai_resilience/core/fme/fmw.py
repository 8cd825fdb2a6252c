"""FME workspace files (``.fmw``) in the shape FME 2025.0.3 saves them: text in, text out.

A workspace is an FME mapping file preceded by an XML header written as ``#!`` comment lines
(docs/fme-flow.md lists the rules, each checked on real saved files).
:func:`render_workspace` writes the templates' minimal graph, Creator -> PythonCaller (v6) ->
Logger, with the PythonCaller's ``<Rejected>`` port connected to a Logger of its own, so no
``@Abort`` is ever compiled in. The script appears twice, in FME's token encoding
(:mod:`fme_ai_resilience.fmw_encoding`): in the header (XML-escaped) and in the mapping's
``SOURCE_CODE``. Everything is derived from the
:class:`WorkspaceSpec`, including the document GUIDs, so rendering the same spec again gives
the same bytes. :mod:`fme_ai_resilience.fmw_check` checks any saved file, whatever release
wrote it.

No FME has opened these files: they copy the shape of real saved workspaces, nothing more.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from ..checks import name as _name
from ..errors import ConfigurationError
from .fmw_encoding import encode_fme, xml_escape
from .parameters import PublishedParameter

__all__ = ["WorkspaceSpec", "render_workspace", "document_guid", "form_entry", "encode_form",
           "COMMON_ATTRIBUTES", "SECTIONS", "LAST_SAVE_BUILD", "BUILD_NUMBER",
           "PYTHON_COMPATIBILITY", "LAST_SAVE_DATE", "DEFAULT_SYMBOL", "Release",
           "RELEASE_2025"]

#: The class the templates' PythonCallers call (their "Class to Process Features").
DEFAULT_SYMBOL = "FeatureProcessor"

#: The release the templates claim: 2025.0.3 writes PythonCaller v6, the first shape with the
#: ``<Rejected>`` port and output tags that is seen in a saved file (fmw-format.md section 4).
LAST_SAVE_BUILD = "FME(R) 2025.0.3.0 (20250602 - Build 25241 - WIN64)"
BUILD_NUMBER = "25241"
#: The lowest interpreter the library supports: FME reads the value as "this version or a
#: newer compatible one", and real 2025.1.1 saves carry 39.
PYTHON_COMPATIBILITY = "39"
#: Fixed, so that regenerating a template gives no diff.
LAST_SAVE_DATE = "2025-06-02T12:00:00"


@dataclass(frozen=True)
class Release:
    """The FME release a generated file claims to be saved by: ``LAST_SAVE_BUILD``, its
    ``build`` number and the fixed save date."""

    last_save_build: str
    build: str
    save_date: str


#: The release :func:`render_workspace` writes (PythonCaller v6); :mod:`.fmw_v4` has the
#: one for FME 2023 and 2024.
RELEASE_2025 = Release(LAST_SAVE_BUILD, BUILD_NUMBER, LAST_SAVE_DATE)

#: The WORKSPACE attributes every saved sample has (2021.2 to 2025.2), in the alphabetical
#: order Workbench writes them.
COMMON_ATTRIBUTES = (
    "ARCGIS_COMPATIBILITY", "ATTR_TYPE_ENCODING", "BEGIN_PYTHON", "BEGIN_TCL", "CATEGORY",
    "DESCRIPTION", "DESTINATION", "DESTINATION_ROUTING_FILE", "DOC_EXTENTS", "DOC_TOP_LEFT",
    "END_PYTHON", "END_TCL", "EXPLICIT_BOOKMARK_ORDER", "FME_BUILD_NUM", "FME_DOCUMENT_GUID",
    "FME_DOCUMENT_PRIORGUID", "FME_GEOMETRY_HANDLING", "FME_IMPLICIT_CSMAP_REPROJECTION_MODE",
    "FME_NAMES_ENCODING", "FME_REPROJECTION_ENGINE", "FME_SERVER_SERVICES",
    "FME_STROKE_MAX_DEVIATION", "HISTORY", "IGNORE_READER_FAILURE", "LAST_SAVE_BUILD",
    "LAST_SAVE_DATE", "LOG_FILE", "LOG_MAX_RECORDED_FEATURES", "MARKDOWN_DESCRIPTION",
    "MARKDOWN_USAGE", "MAX_LOG_FEATURES", "MULTI_WRITER_DATASET_ORDER", "PASSWORD",
    "PYTHON_COMPATIBILITY", "REDIRECT_TERMINATORS", "SAVE_ON_PROMPT_AND_RUN", "SHOW_ANNOTATIONS",
    "SHOW_INFO_NODES", "SOURCE", "SOURCE_ROUTING_FILE", "TERMINATE_REJECTED", "TITLE", "USAGE",
    "USE_MARKDOWN", "VIEW_POSITION", "WARN_INVALID_XFORM_PARAM", "WORKSPACE_VERSION",
    "ZOOM_SCALE")

#: The header's sections: always all sixteen, in this order, empty ones included.
SECTIONS = ("DATASETS", "DATA_TYPES", "GEOM_TYPES", "FEATURE_TYPES", "FMESERVER",
            "GLOBAL_PARAMETERS", "USER_PARAMETERS", "COMMENTS", "CONSTANTS", "BOOKMARKS",
            "TRANSFORMERS", "FEAT_LINKS", "BREAKPOINTS", "ATTR_LINKS", "SUBDOCUMENTS",
            "LOOKUP_TABLES")

def document_guid(name: str) -> str:
    """A lower-case UUID derived from ``name`` (UUID version 5 in the URL namespace).

    Computed with hashlib, as :func:`uuid.uuid5` would, so that the same workspace name always
    gets the same GUID and the pure core stays free of the ``uuid`` module.
    """
    namespace = bytes.fromhex("6ba7b8119dad11d180b400c04fd430c8")  # uuid.NAMESPACE_URL
    raw = bytearray(hashlib.sha1(namespace + name.encode("utf-8")).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --- the specification -----------------------------------------------------------------------

_WORKSPACE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class WorkspaceSpec:
    """What one generated workspace holds.

    ``name`` is the file name without ``.fmw`` (it also seeds the document GUIDs); ``script``
    is the PythonCaller's script, exactly as its ``.py`` file holds it; ``symbol`` the class
    (or function) FME calls; ``parameters`` the published parameters, in the order Workbench
    shows them; ``attributes`` the attributes the script sets, exposed on both of the
    PythonCaller's ports (its "Attributes to Expose") so that downstream transformers can pick
    them. Raises :class:`ConfigurationError` for a script FME could not run (a syntax
    error, no ``symbol``, a character FME cannot encode).
    """

    name: str
    script: str
    parameters: Tuple[PublishedParameter, ...] = ()
    attributes: Tuple[str, ...] = ()
    symbol: str = DEFAULT_SYMBOL
    output_message: str = "PythonCaller output"
    rejected_message: str = "rejected: @Value(fme_rejection_code) @Value(fme_rejection_message)"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _WORKSPACE_NAME.fullmatch(self.name):
            raise ConfigurationError("name", self.name, "must be letters, digits, _ and -")
        if not isinstance(self.symbol, str) or not _SYMBOL.fullmatch(self.symbol):
            raise ConfigurationError("symbol", self.symbol, "must be a Python name")
        _name("script", self.script)
        try:
            compile(self.script, f"{self.name}.py", "exec")
        except (SyntaxError, ValueError) as exc:
            raise ConfigurationError("script", self.name, f"does not compile: {exc}") from None
        if not re.search(rf"^(class|def) {self.symbol}\b", self.script, re.M):
            raise ConfigurationError("script", self.name,
                                     f"defines no top-level class or function {self.symbol}")
        _encodable("script", self.script)
        params = tuple(self.parameters)
        for p in params:
            if not isinstance(p, PublishedParameter):
                raise ConfigurationError("parameters", p, "must be PublishedParameter values")
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise ConfigurationError("parameters", names, "names a parameter twice")
        object.__setattr__(self, "parameters", params)
        exposed = tuple(self.attributes)
        for a in exposed:
            if not isinstance(a, str) or not _SYMBOL.fullmatch(a):
                raise ConfigurationError("attributes", a, "must be attribute names")
        if len(set(exposed)) != len(exposed):
            raise ConfigurationError("attributes", exposed, "names an attribute twice")
        object.__setattr__(self, "attributes", exposed)
        for label in ("output_message", "rejected_message"):
            _encodable(label, _name(label, getattr(self, label)))


def _encodable(label: str, text: str) -> None:
    """Raise, naming the line, when ``text`` holds a character FME's encoding cannot carry."""
    for number, line in enumerate(text.split("\n"), start=1):
        try:
            encode_fme(line)
        except ConfigurationError as exc:
            raise ConfigurationError(label, exc.value, f"line {number}: {exc.reason}") from None


# --- rendering -------------------------------------------------------------------------------

LINK_COLOUR = "0.95686274509803926,0.95294117647058818,0.92941176470588238,1"
_SEPARATOR = "# " + "-" * 73
_PARAMETER_SEPARATOR = "# " + "=" * 76
_ABORT_FREE_TERMINATION = "NO"  # rejected features never stop the translation


@dataclass(frozen=True)
class _Node:
    identifier: int
    kind: str
    version: str
    xformer_name: str
    position: Tuple[int, int]
    order: int
    outputs: Tuple[Tuple[str, Tuple[str, ...]], ...]  # (port, attributes shown on it)
    parms: Tuple[Tuple[str, str], ...]
    extra: Tuple[Tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Link:
    identifier: int
    source: _Node
    port: int
    target: _Node


@dataclass
class _Graph:
    nodes: List[_Node] = field(default_factory=list)
    links: List[_Link] = field(default_factory=list)


def _graph(spec: WorkspaceSpec) -> Tuple[_Graph, Dict[str, _Node]]:
    """The minimal canvas: Creator -> PythonCaller -> Logger, <Rejected> -> Logger_2."""
    created = ("_creation_instance",) + spec.attributes
    rejected = created + ("fme_rejection_code", "fme_rejection_message")
    exposed = " ".join(f"{a} buffer" for a in spec.attributes)
    creator = _creator_node(2, "Creator", (0, 0), 500000000000001, created)
    caller = _Node(3, "PythonCaller", "6", "PythonCaller", (700, 0), 500000000000002,
                   (("OUTPUT", created), ("<Rejected>", rejected)), (
                       ("ADVANCED_GROUP", ""), ("GROUP_BY", "<Unused>"),
                       ("GROUP_BY_MODE", "<Unused>"), ("GROUP_PROCESSING_GROUP", "NO"),
                       ("HIDE_ATTRIBUTES", ""), ("LIST_ATTRS", ""), ("NEW_ATTRIBUTES", exposed),
                       ("PARAMETERS_GROUP", ""), ("PYTHONSOURCE", encode_fme(spec.script)),
                       ("PYTHONSYMBOL", spec.symbol), ("TRANSFORMER_GROUP", ""),
                       ("XFORMER_NAME", "PythonCaller")))

    out_logger = _logger_node(5, "Logger", (1400, -150), created, spec.output_message, "INFO",
                              500000000000003)
    reject_logger = _logger_node(7, "Logger_2", (1400, 150), rejected, spec.rejected_message,
                                 "ERROR", 500000000000004)
    graph = _Graph([creator, caller, out_logger, reject_logger],
                   [_Link(4, creator, 0, caller), _Link(6, caller, 0, out_logger),
                    _Link(8, caller, 1, reject_logger)])
    return graph, {"creator": creator, "caller": caller, "logger": out_logger,
                   "reject_logger": reject_logger}


def _creator_node(identifier: int, name: str, position: Tuple[int, int], order: int,
                  attributes: Tuple[str, ...]) -> _Node:
    """A Creator (version 7, as 2025 saves it) making one feature with no geometry."""
    return _Node(identifier, "Creator", "7", name, position, order, (("CREATED", attributes),), (
        ("ATEND", "no"), ("COORDSYS", ""), ("CRE_ATTR", "_creation_instance"),
        ("GEOJSON", "<Unused>"), ("GEOM", encode_fme(_NULL_GEOMETRY)),
        ("GEOMTYPE", "Geometry Object"), ("NUM", "1"), ("OAN_GROUP", ""),
        ("PARAMETERS_GROUP", ""), ("TRANSFORMER_GROUP", ""), ("XFORMER_NAME", name)))


def _logger_node(identifier: int, name: str, position: Tuple[int, int],
                 attributes: Tuple[str, ...], message: str, severity: str, order: int) -> _Node:
    """A Logger (version 4, as every saved sample has it) logging ``message``."""
    return _Node(identifier, "Logger", "4", name, position, order,
                 (("LOGGED", attributes),), (
                     ("FEATURE_TYPE", "<Unused>"), ("LOG_FEATURE", "NONE"),
                     ("MAXCOORDS", "<Unused>"), ("MAXFEATS", "10000"),
                     ("MESSAGE", encode_fme(message)), ("MSG_GRP", ""),
                     ("PARAMETERS_GROUP", ""), ("SEVERITY", severity),
                     ("TRANSFORMER_GROUP", ""), ("XFORMER_NAME", name)),
                 (("SHOW_BLANK_INPUT_FT", "false"),))


_NULL_GEOMETRY = ('<?xml version="1.0" encoding="US_ASCII" standalone="no" ?>'
                  '<geometry><null/></geometry>')


def render_workspace(spec: WorkspaceSpec) -> str:
    """The ``.fmw`` text of ``spec``: UTF-8 text with LF line endings and a final newline.

    The same spec always renders to the same text (GUIDs from the name, a fixed save date).
    """
    if not isinstance(spec, WorkspaceSpec):
        raise ConfigurationError("spec", spec, "must be a WorkspaceSpec")
    graph, nodes = _graph(spec)
    lines = _header(spec, graph)
    lines += ["#! </WORKSPACE>", ""]
    lines += _mapping(spec, nodes, graph)
    return "\n".join(lines) + "\n"


def _attribute_lines(attributes: Sequence[Tuple[str, str]]) -> List[str]:
    return [f'#!   {name}="{xml_escape(value)}"' for name, value in attributes]


def _header(spec: WorkspaceSpec, graph: _Graph, release: Release = RELEASE_2025) -> List[str]:
    guid = document_guid(f"fme-ai-resilience:workspace:{spec.name}")
    prior = document_guid(f"fme-ai-resilience:workspace:{spec.name}:prior")
    xs = [n.position[0] for n in graph.nodes]
    ys = [n.position[1] for n in graph.nodes]
    attributes = {
        "ARCGIS_COMPATIBILITY": "ARCGIS_AUTO", "ATTR_TYPE_ENCODING": "SDF", "BEGIN_PYTHON": "",
        "BEGIN_TCL": "", "CATEGORY": "", "DESCRIPTION": "", "DESTINATION": "NONE",
        "DESTINATION_ROUTING_FILE": "",
        "DOC_EXTENTS": f"{max(xs) - min(xs) + 454} {max(ys) - min(ys) + 71}",
        "DOC_TOP_LEFT": f"{min(xs)} {min(ys)}", "END_PYTHON": "", "END_TCL": "",
        "EXPLICIT_BOOKMARK_ORDER": "false", "FME_BUILD_NUM": release.build,
        "FME_BULK_MODE_THRESHOLD": "2000", "FME_DOCUMENT_GUID": guid,
        "FME_DOCUMENT_PRIORGUID": prior, "FME_GEOMETRY_HANDLING": "Enhanced",
        "FME_IMPLICIT_CSMAP_REPROJECTION_MODE": "Auto", "FME_NAMES_ENCODING": "UTF-8",
        "FME_REPROJECTION_ENGINE": "FME", "FME_SERVER_SERVICES": "",
        "FME_STROKE_MAX_DEVIATION": "0", "HISTORY": "", "IGNORE_READER_FAILURE": "No",
        "LAST_SAVE_BUILD": release.last_save_build, "LAST_SAVE_DATE": release.save_date,
        "LOG_FILE": "",
        "LOG_MAX_RECORDED_FEATURES": "200", "MARKDOWN_DESCRIPTION": "", "MARKDOWN_USAGE": "",
        "MAX_LOG_FEATURES": "200", "MULTI_WRITER_DATASET_ORDER": "BY_ID", "PASSWORD": "",
        "PYTHON_COMPATIBILITY": PYTHON_COMPATIBILITY, "REDIRECT_TERMINATORS": "NONE",
        "SAVE_ON_PROMPT_AND_RUN": "Yes", "SHOW_ANNOTATIONS": "true", "SHOW_INFO_NODES": "true",
        "SOURCE": "NONE", "SOURCE_ROUTING_FILE": "",
        "TERMINATE_REJECTED": _ABORT_FREE_TERMINATION, "TITLE": "", "USAGE": "",
        "USE_MARKDOWN": "", "VIEW_POSITION": f"{min(xs) - 50} {max(ys) + 150}",
        "WARN_INVALID_XFORM_PARAM": "Yes", "WORKSPACE_VERSION": "1", "ZOOM_SCALE": "100",
    }
    lines = ['#! <?xml version="1.0" encoding="UTF-8" ?>', "#! <WORKSPACE",
             "#    Command line to run this workspace:",
             f'#        "C:\\Program Files\\FME\\fme.exe" {spec.name}.fmw']
    lines += [f'#          --{p.name} "{p.default}"' for p in spec.parameters]
    lines += ['#          --FME_LAUNCH_VIEWER_APP "YES"', "#    "]
    lines += _attribute_lines(sorted(attributes.items()))
    lines.append("#! >")
    for section in SECTIONS[:5]:
        lines += [f"#! <{section}>", f"#! </{section}>"]
    lines += _global_parameters(spec.parameters)
    lines += _user_parameters(spec.parameters)
    for section in ("COMMENTS", "CONSTANTS", "BOOKMARKS"):
        lines += [f"#! <{section}>", f"#! </{section}>"]
    lines.append("#! <TRANSFORMERS>")
    for node in graph.nodes:
        lines += _transformer(node, release.build)
    lines += ["#! </TRANSFORMERS>", "#! <FEAT_LINKS>"]
    for link in graph.links:
        lines += _feat_link(link)
    lines.append("#! </FEAT_LINKS>")
    for section in SECTIONS[12:]:
        lines += [f"#! <{section}>", f"#! </{section}>"]
    return lines


def _gui_line(p: PublishedParameter) -> str:
    # A user-made text parameter saved by 2025.0.3 reads "GUI TEXT NAME Prompt"; an optional
    # one gets OPTIONAL in front, as optional file parameters do. A secret is a password
    # parameter, which real 2025.1.1 saves write "GUI OPTIONAL PASSWORD_ENCODED NAME Prompt"
    # (their value then FME-encrypted, fme_decrypt(...), which the callers decrypt).
    kind = "PASSWORD_ENCODED" if p.secret else "TEXT"
    return f"GUI {'' if p.required else 'OPTIONAL '}{kind} {p.name} {p.prompt}"


def _global_parameters(parameters: Sequence[PublishedParameter]) -> List[str]:
    lines = ["#! <GLOBAL_PARAMETERS>"]
    for p in parameters:
        lines += ["#! <GLOBAL_PARAMETER"]
        lines += _attribute_lines((("GUI_LINE", _gui_line(p)), ("DEFAULT_VALUE", p.default),
                                   ("IS_STAND_ALONE", "true")))
        lines.append("#! />")
    return lines + ["#! </GLOBAL_PARAMETERS>"]


def form_entry(p: PublishedParameter) -> Dict[str, object]:
    """The FORM JSON object of a parameter, keys in the order FME 2025.0 writes them: a text
    parameter, or for a secret FME's password type (masked where FME shows it), with only the
    keys Safe's own forms give a password (HTTPCaller's): no saved workspace holds one."""
    entry: Dict[str, object] = {"name": p.name, "prompt": p.prompt, "valueType": "string"}
    if not p.required:
        entry["required"] = False
    entry.update({"defaultValue": p.default,
                  "supportedValueTypes": ["expression", "globalParameter"],
                  "deprecatedFlags": ["none"]})
    if p.secret:
        entry["type"] = "password"
    else:
        entry.update({"type": "text", "editor": "plaintext", "showEditButton": False})
    return entry


def encode_form(parameters: Sequence[PublishedParameter]) -> str:
    """The ``FORM`` attribute: base64 of the compact JSON ``{"parameters": [...]}``."""
    form = {"parameters": [form_entry(p) for p in parameters]}
    text = json.dumps(form, separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _user_parameters(parameters: Sequence[PublishedParameter]) -> List[str]:
    lines = ["#! <USER_PARAMETERS", f'#!   FORM="{encode_form(parameters)}"', "#! >",
             "#! <PARAMETER_INFO>"]
    for p in parameters:
        lines.append(f'#!     <INFO NAME="{xml_escape(p.name)}" ')
        lines += _attribute_lines((("DEFAULT_VALUE", p.default), ("SCOPE", "STAND_ALONE"),
                                   ("GENERATED_GUI_LINE", "false"), ("GUI_LINE", _gui_line(p))))
        lines.append("#! />")
    return lines + ["#! </PARAMETER_INFO>", "#! </USER_PARAMETERS>"]


def _transformer(node: _Node, build: str = BUILD_NUMBER) -> List[str]:
    x, y = node.position
    lines = ["#! <TRANSFORMER"]
    lines += _attribute_lines((
        ("IDENTIFIER", str(node.identifier)), ("TYPE", node.kind), ("VERSION", node.version),
        ("POSITION", f"{x} {y}"), ("BOUNDING_RECT", f"{x} {y} 454 71"),
        ("ORDER", str(node.order)), ("PARMS_EDITED", "true"), ("ENABLED", "true"),
        ("LAST_PARM_EDIT", build)) + node.extra)
    lines.append("#! >")
    for index, (port, attributes) in enumerate(node.outputs):
        lines += [f'#!     <OUTPUT_FEAT NAME="{xml_escape(port)}"/>',
                  f'#!     <FEAT_COLLAPSED COLLAPSED="{index}"/>']
        lines += [f'#!     <XFORM_ATTR ATTR_NAME="{xml_escape(a)}" IS_USER_CREATED="false" '
                  f'FEAT_INDEX="{index}" />' for a in attributes]
    lines += [f'#!     <XFORM_PARM PARM_NAME="{name}" PARM_VALUE="{xml_escape(value)}"/>'
              for name, value in sorted(node.parms)]
    return lines + ["#! </TRANSFORMER>"]


def _feat_link(link: _Link) -> List[str]:
    port = encode_fme(link.source.outputs[link.port][0])
    return ["#! <FEAT_LINK"] + _attribute_lines((
        ("IDENTIFIER", str(link.identifier)), ("SOURCE_NODE", str(link.source.identifier)),
        ("TARGET_NODE", str(link.target.identifier)),
        ("SOURCE_PORT_DESC", f"fo {link.port} {port}"), ("TARGET_PORT_DESC", "fi 0 "),
        ("ENABLED", "true"), ("EXECUTION_IDX", "0"), ("HIDDEN", "false"),
        ("COLOUR", LINK_COLOUR), ("PEN_WIDTH", "4"), ("PEN_STYLE", "1"),
        ("LINK_STYLE_NAME", "<Default>"), ("EXTRA_POINTS", ""))) + ["#! />"]


def _mapping(spec: WorkspaceSpec, nodes: Dict[str, _Node], graph: _Graph) -> List[str]:
    creator_link = next(link for link in graph.links if link.source is nodes["creator"])
    lines = _mapping_head(spec.parameters)
    lines += _creator_block(nodes["creator"], creator_link)
    lines += [_SEPARATOR, _CREATOR_BRANCH_TARGET, _SEPARATOR]
    lines += _caller_block(spec, nodes["caller"], nodes["creator"])
    lines.append(_SEPARATOR)
    for key, severity in (("logger", "INFO"), ("reject_logger", "ERROR")):
        source_port = 0 if key == "logger" else 1
        lines += _logger_block(spec, nodes[key], nodes["caller"], source_port, severity)
        lines.append(_SEPARATOR)
    return lines + _mapping_tail()


_CREATOR_BRANCH_TARGET = ('FACTORY_DEF * TeeFactory   FACTORY_NAME '
                          '"$(WB_CURRENT_CONTEXT)_CREATOR_BRANCH_TARGET"   INPUT FEATURE_TYPE *  '
                          'OUTPUT FEATURE_TYPE *')


def _mapping_head(parameters: Sequence[PublishedParameter],
                  release: Release = RELEASE_2025) -> List[str]:
    """The mapping from ``FME_PYTHON_VERSION`` to ``DEFAULT_MACRO WB_CURRENT_CONTEXT``."""
    lines = [f"FME_PYTHON_VERSION {PYTHON_COMPATIBILITY}", "ARCGIS_COMPATIBILITY ARCGIS_AUTO"]
    if parameters:
        lines.append(_PARAMETER_SEPARATOR)
        for p in parameters:
            lines += [f"DEFAULT_MACRO {p.name} {p.default}", ""]
        lines.append(_PARAMETER_SEPARATOR)
        lines += [f"INCLUDE [ if {{{{$({p.name}$encode)}} == {{}}}} {{ puts_real {{Parameter "
                  f"'{p.name}' must be given a value.}}; exit 1; }}; ]"
                  for p in parameters if p.required]
    lines += [
        "#! START_HEADER", "#! START_WB_HEADER", "READER_TYPE MULTI_READER",
        "WRITER_TYPE MULTI_WRITER", "WRITER_KEYWORD MULTI_DEST", "MULTI_DEST_DATASET null",
        "#! END_WB_HEADER", "#! START_WB_HEADER", "#! END_WB_HEADER", "#! END_HEADER", "",
        'LOG_FILENAME "$(FME_MF_DIR)$(WORKSPACE_NAME).log"', "LOG_APPEND NO",
        "LOG_MAX_FEATURES 200", "LOG_MAX_RECORDED_FEATURES 200", "FME_REPROJECTION_ENGINE FME",
        "FME_IMPLICIT_CSMAP_REPROJECTION_MODE Auto", "FME_GEOMETRY_HANDLING Enhanced",
        "FME_STROKE_MAX_DEVIATION 0", "FME_NAMES_ENCODING UTF-8",
        "FME_BULK_MODE_THRESHOLD 2000",
        f'LAST_SAVE_BUILD "{release.last_save_build.replace("FME(R)", "FME", 1)}"',
        _SEPARATOR, "", "MULTI_READER_CONTINUE_ON_READER_FAILURE No", "", _SEPARATOR, "",
        "MACRO FME_VIEWER_APP fmedatainspector", "DEFAULT_MACRO WB_CURRENT_CONTEXT", _SEPARATOR]
    return lines


def _mapping_tail() -> List[str]:
    """The mapping's end: the routing correlator and the final nuker."""
    return ["", 'FACTORY_DEF * RoutingFactory FACTORY_NAME "Destination Feature Type Routing '
            'Correlator"   COMMAND_PARM_EVALUATION SINGLE_PASS   INPUT FEATURE_TYPE *   '
            'FEATURE_TYPE_ATTRIBUTE __wb_out_feat_type__   OUTPUT ROUTED FEATURE_TYPE *    '
            'OUTPUT NOT_ROUTED FEATURE_TYPE __nuke_me__ @Tcl2("FME_StatMessage 818059 '
            '[FME_GetAttribute fme_template_feature_type] 818060 818061 fme_warn")',
            _SEPARATOR, "",
            'FACTORY_DEF * TeeFactory   FACTORY_NAME "Final Output Nuker"   INPUT '
            'FEATURE_TYPE __nuke_me__', ""]


def _feature_type(node: _Node, port: int) -> str:
    return f"{node.xformer_name}_{node.outputs[port][0]}"


def _creator_block(creator: _Node, link: _Link) -> List[str]:
    n = creator.xformer_name
    geometry = encode_fme(_NULL_GEOMETRY)
    return [
        f"Tcl2 proc {n}_CoordSysRemover {{}} {{   global FME_CoordSys;   set FME_CoordSys {{}}; }}",
        f"MACRO {n}_XML     NOT_ACTIVATED", f"MACRO {n}_GEOJSON NOT_ACTIVATED",
        f"INCLUDE [ if {{ {{Geometry Object}} == {{Geometry Object}} }} {{            puts "
        f"{{MACRO {n}_XML *}} }} ]",
        f"INCLUDE [ if {{ {{Geometry Object}} == {{GeoJSON}} }} {{            puts "
        f"{{MACRO {n}_GEOJSON *}} }} ]",
        f"FACTORY_DEF {{$({n}_XML)}} CreationFactory    FACTORY_NAME {{ {n}_XML_Creator }}    "
        f"CREATE_AT_END {{ no }}    OUTPUT {{ FEATURE_TYPE _____CREATED______        "
        f"@Geometry(FROM_ENCODED_STRING,{geometry}) }}",
        f"FACTORY_DEF {{$({n}_GEOJSON)}} CreationFactory    FACTORY_NAME {{ {n}_GEOJSON_Creator }}"
        f"    CREATE_AT_END {{ no }}    OUTPUT {{ FEATURE_TYPE _____CREATED______ \t   "
        f"@SupplyAttributes(ENCODED,__GeoJSONCreatorTemp__,<Unused>)        "
        f"@JSONGeometry(FROM_ATTRIBUTE,GEOJSON,__GeoJSONCreatorTemp__, "
        f"PREFER_ERROR_OVER_REJECTION) \t   @RemoveAttributes(__GeoJSONCreatorTemp__) }}",
        f"FACTORY_DEF {{*}} TeeFactory    FACTORY_NAME {{ {n}_Cloner }}    INPUT FEATURE_TYPE "
        f"_____CREATED______        @Tcl2({n}_CoordSysRemover)        @CoordSys()    "
        f'NUMBER_OF_COPIES {{ 1 }}    COPY_NUMBER_ATTRIBUTE {{ "_creation_instance" }}    '
        f"OUTPUT {{ FEATURE_TYPE {_feature_type(creator, 0)}        fme_feature_type {n}"
        f"         }}",
        f'FACTORY_DEF * BranchingFactory   FACTORY_NAME "{_feature_type(creator, 0)} Brancher '
        f'-1 {link.identifier}"   INPUT FEATURE_TYPE {_feature_type(creator, 0)}   '
        f'TARGET_FACTORY "$(WB_CURRENT_CONTEXT)_CREATOR_BRANCH_TARGET"   MAXIMUM_COUNT None   '
        f"OUTPUT PASSED FEATURE_TYPE *"]


def _caller_block(spec: WorkspaceSpec, caller: _Node, creator: _Node) -> List[str]:
    n = caller.xformer_name
    return [
        'FME_PYTHON_PATH "$(FME_MF_DIR)"',
        f"FACTORY_DEF {{*}} PythonFactory    FACTORY_NAME {{ {n} }}    "
        f"FLUSH_WHEN_GROUPS_CHANGE {{ <Unused> }}    INPUT  FEATURE_TYPE "
        f"{_feature_type(creator, 0)}    SYMBOL_NAME {{ {spec.symbol} }}    "
        f"SOURCE_CODE {{ {encode_fme(spec.script)} }}    PY_OUTPUT_TAGS {{ PYOUTPUT <Rejected> }}"
        f"    OUTPUT {{ PYOUTPUT FEATURE_TYPE {_feature_type(caller, 0)}         }}    "
        f"OUTPUT {{ <Rejected> FEATURE_TYPE {_feature_type(caller, 1)}         }}"]


def _logger_block(spec: WorkspaceSpec, logger: _Node, caller: _Node, port: int,
                  severity: str) -> List[str]:
    n = logger.xformer_name
    message = dict(logger.parms)["MESSAGE"]
    fme_uuid = document_guid(f"fme-ai-resilience:workspace:{spec.name}:{n}").replace("-", "_")
    return [
        "# Create a FME_UUID_SAFE from the FME_UUID so we can use it for Tcl identifiers "
        "(FMEDESKTOP-11308)",
        f"INCLUDE [ FME_CleanseFMEUUID {{{n}_{fme_uuid}0}} ]",
        "# If the Logger was in a custom transformer, the custom transformer's name was not "
        "being",
        '# properly logged -- instead we saw "$(<customXformerName_WORKSPACE_NAME)" being '
        "logged as the prefix of the",
        "# message. By deferencing and expanding out the XFORMER_NAME below, and then \"WWJD\" "
        "encoding it when it is",
        "# used in the @Log call via the $encode macro name suffix trick, we get the right "
        "result, and the right result",
        "# safely.",
        f"MACRO LOGGABLE_XFORMER_NAME {n}",
        f"FACTORY_DEF {{*}} TeeFactory    FACTORY_NAME {{ {n}_Logger }}    INPUT  FEATURE_TYPE "
        f"{_feature_type(caller, port)}    OUTPUT {{ FEATURE_TYPE {_feature_type(logger, 0)}"
        f'                  @Log(ENCODED, "$(LOGGABLE_XFORMER_NAME$encode):<space>'
        f'@EvaluateExpression(FDIV,STRING_ENCODED,{message},{n})","<Unused>","10000","",'
        f"{severity},NONE,$(FME_UUID_SAFE))                   }}",
        f'FACTORY_DEF * TeeFactory   FACTORY_NAME "{n} LOGGED Transformer Output Nuker"   '
        f"INPUT FEATURE_TYPE {_feature_type(logger, 0)}"]
