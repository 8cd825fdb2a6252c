"""The templates for FME 2023 and 2024: PythonCaller version 4, in the shape FME 2022.1.3 saves.

FME instantiates no transformer version newer than it knows, and the version-6 PythonCaller
(the ``<Rejected>`` port, :mod:`.fmw`) was first seen in 2025 saves; every FME keeps opening
older versions (a real 2025.1.1 save holds two version-4 PythonCallers). So these files claim
the newest release before 2023 with a saved PythonCaller, 2022.1.3 (build 22630), and hold
only transformer versions a 2022.1.3 save holds: PythonCaller 4, Tester 3 and Logger 4 (each
seen with ``LAST_PARM_EDIT="22630"``), and the Creator version 5 a 2021.2 save holds.
fmw-format.md, sections 2 and 3.

The graph: Creator -> PythonCaller (one Output port) -> Tester (``fme_rejection_code`` has a
value) -> PASSED: Logger_2 (ERROR, the rejected features) and FAILED: Logger (the rest). The
script's class says ``rejected_port = False``, so the caller never asks for an output tag a
version-4 PythonCaller does not have. ``TERMINATE_REJECTED="NO"`` as in every template.
No FME has opened these files.
"""
from __future__ import annotations

import base64
import json
from typing import Dict, List, Sequence, Tuple

from .fmw import (_CREATOR_BRANCH_TARGET, _SEPARATOR, _Graph, _header, _Link, _logger_block,
                  _logger_node, _mapping_tail, _Node, _NULL_GEOMETRY, _PARAMETER_SEPARATOR,
                  PYTHON_COMPATIBILITY, Release, WorkspaceSpec, form_entry)
from .fmw_encoding import encode_fme
from .parameters import PublishedParameter

__all__ = ["render_workspace_v4", "RELEASE_2022", "V4_FOLDER", "FME_RELEASES"]

#: The release the version-4 templates claim.
RELEASE_2022 = Release("FME(R) 2022.1.3.0 (20220928 - Build 22630 - WIN64)", "22630",
                       "2022-09-28T12:00:00")
#: Where the version-4 templates and their scripts live, under the templates' folder.
V4_FOLDER = "fme2023-2024"
#: The FME releases ``workspaces build --fme`` knows, and the shape each gets.
FME_RELEASES: Dict[str, str] = {"2023": "v4", "2024": "v4", "2025": "v6"}
_REJECTED_ATTRIBUTES = ("fme_rejection_code", "fme_rejection_message")


def _graph(spec: WorkspaceSpec) -> Tuple[_Graph, Dict[str, _Node]]:
    exposed = spec.attributes + _REJECTED_ATTRIBUTES
    creator = _Node(2, "Creator", "5", "Creator", (0, 0), 500000000000001,
                    (("CREATED", ()),), (
                        ("ATEND", "no"), ("COORDS", "<Unused>"), ("COORDSYS", ""),
                        ("CRE_ATTR", ""), ("GEOM", encode_fme(_NULL_GEOMETRY)),
                        ("GEOMTYPE", "Geometry Object"), ("NUM", "1"),
                        ("PARAMETERS_GROUP", ""), ("TRANSFORMER_GROUP", ""),
                        ("XFORMER_NAME", "Creator")))
    caller = _Node(3, "PythonCaller", "4", "PythonCaller", (700, 0), 500000000000002,
                   (("OUTPUT", exposed),), (
                       ("ADVANCED_GROUP", ""), ("GROUP_BY", "<Unused>"),
                       ("GROUP_BY_MODE", "<Unused>"), ("GROUP_PROCESSING_GROUP", "NO"),
                       ("HIDE_ATTRIBUTES", ""), ("LIST_ATTRS", ""),
                       ("NEW_ATTRIBUTES", " ".join(f"{a} buffer" for a in exposed)),
                       ("PARAMETERS_GROUP", ""), ("PYTHONSOURCE", encode_fme(spec.script)),
                       ("PYTHONSYMBOL", spec.symbol), ("TRANSFORMER_GROUP", ""),
                       ("XFORMER_NAME", "PythonCaller")))
    tester = _Node(5, "Tester", "3", "Tester", (1400, 0), 500000000000003,
                   (("PASSED", exposed), ("FAILED", exposed)), (
                       ("ADVANCED_GROUP", ""), ("BOOL_OP", "OR"),
                       ("COMPOSITE_MSG", "<Unused>"), ("COMPOSITE_TEST", "1"),
                       ("PRESERVE_FEATURE_ORDER", "Per Output Port"),
                       ("TEST_CLAUSE", 'TEST fme_rejection_code ATTRIBUTE_HAS_A_VALUE ""'),
                       ("TEST_CLAUSE_GRP", ""), ("TEST_MODE", "TEST"),
                       ("TEST_PREVIEW_GROUP", "<Unused>"), ("TRANSFORMER_GROUP", ""),
                       ("XFORMER_NAME", "Tester")))
    logger = _logger_node(7, "Logger", (2100, -150), exposed, spec.output_message, "INFO",
                          500000000000004)
    rejected = _logger_node(9, "Logger_2", (2100, 150), exposed, spec.rejected_message,
                            "ERROR", 500000000000005)
    graph = _Graph([creator, caller, tester, logger, rejected],
                   [_Link(4, creator, 0, caller), _Link(6, caller, 0, tester),
                    _Link(8, tester, 1, logger), _Link(10, tester, 0, rejected)])
    return graph, {"creator": creator, "caller": caller, "tester": tester, "logger": logger,
                   "rejected": rejected}


def _encode_form(parameters: Sequence[PublishedParameter]) -> str:
    """FORM as 2021/2022 write it: the same entries, their JSON keys sorted."""
    form = {"parameters": [form_entry(p) for p in parameters]}
    text = json.dumps(form, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def render_workspace_v4(spec: WorkspaceSpec) -> str:
    """The ``.fmw`` text of ``spec`` in the version-4 shape (see the module docstring): UTF-8,
    LF, a final newline; the same spec always gives the same text."""
    graph, nodes = _graph(spec)
    header = _header(spec, graph, RELEASE_2022)
    header = [f'#!   FORM="{_encode_form(spec.parameters)}"' if line.startswith("#!   FORM=")
              else line for line in header]
    lines = header + ["#! </WORKSPACE>", ""] + _mapping_head(spec)
    lines += _creator_block(nodes["creator"])
    lines += [_SEPARATOR, _CREATOR_BRANCH_TARGET, _SEPARATOR]
    lines += _caller_block(spec, nodes["caller"])
    lines += [_SEPARATOR] + _tester_block(nodes["tester"]) + [_SEPARATOR]
    for key, port, severity in (("logger", 1, "INFO"), ("rejected", 0, "ERROR")):
        lines += _logger_block(spec, nodes[key], nodes["tester"], port, severity)
        lines.append(_SEPARATOR)
    return "\n".join(lines + _mapping_tail()) + "\n"


def _mapping_head(spec: WorkspaceSpec) -> List[str]:
    lines = [f"FME_PYTHON_VERSION {PYTHON_COMPATIBILITY}", "ARCGIS_COMPATIBILITY ARCGIS_AUTO"]
    if spec.parameters:
        lines.append(_PARAMETER_SEPARATOR)
        for p in spec.parameters:
            lines += [f"DEFAULT_MACRO {p.name} {p.default}", ""]
        lines.append(_PARAMETER_SEPARATOR)
        lines += [f"INCLUDE [ if {{{{$({p.name}$encode)}} == {{}}}} {{ puts_real {{Parameter "
                  f"'{p.name}' must be given a value.}}; exit 1; }}; ]"
                  for p in spec.parameters if p.required]
    return lines + [
        "#! START_HEADER", "#! START_WB_HEADER", "READER_TYPE MULTI_READER",
        "WRITER_TYPE NULL", "WRITER_KEYWORD NULL_DEST", "NULL_DEST_DATASET null",
        "#! END_WB_HEADER", "#! START_WB_HEADER", "#! END_WB_HEADER", "#! END_HEADER", "",
        f'LOG_FILENAME "$(FME_MF_DIR){spec.name}.log"', "LOG_APPEND NO",
        "LOG_FILTER_MASK -1", "LOG_MAX_FEATURES 200", "LOG_MAX_RECORDED_FEATURES 200",
        "FME_REPROJECTION_ENGINE FME", "FME_IMPLICIT_CSMAP_REPROJECTION_MODE Auto",
        "FME_GEOMETRY_HANDLING Enhanced", "FME_STROKE_MAX_DEVIATION 0",
        "FME_NAMES_ENCODING UTF-8", "FME_BULK_MODE_THRESHOLD 2000",
        f'LAST_SAVE_BUILD "{RELEASE_2022.last_save_build.replace("FME(R)", "FME", 1)}"',
        _SEPARATOR, "", "MULTI_READER_CONTINUE_ON_READER_FAILURE No", "", _SEPARATOR, "",
        "MACRO FME_VIEWER_APP fmedatainspector", "DEFAULT_MACRO WB_CURRENT_CONTEXT", _SEPARATOR]


def _creator_block(creator: _Node) -> List[str]:
    """Creator version 5 as a 2021.2 save writes it (a geometry object, one feature)."""
    n = creator.xformer_name
    box = ("INCLUDE [ if { {Geometry Object} == {2D Min/Max Box} } {            set comment {"
           "                We need to turn the COORDS which are                    minX minY "
           "maxX maxY                into a full polygon list of coordinates            };"
           "            set splitCoords [split [string trim {<Unused>}]];            if { "
           "[llength $splitCoords] > 4} {               set trimmedCoords {};               "
           "foreach item $splitCoords { if { $item != {} } {lappend trimmedCoords $item} };"
           "               set splitCoords $trimmedCoords;            };            if { "
           "[llength $splitCoords] != 4 } {                error {Creator: Coordinate list is "
           "expected to be a space delimited list of four numbers as 'minx miny maxx maxy' - "
           "`<Unused>' is invalid};            };            set minX [lindex $splitCoords 0];"
           "            set minY [lindex $splitCoords 1];            set maxX [lindex "
           "$splitCoords 2];            set maxY [lindex $splitCoords 3];            puts "
           f'"MACRO {n}_COORDS $minX $minY $minX $maxY $maxX $maxY $maxX $minY $minX $minY";'
           f"            puts {{MACRO {n}_2D3D 2D_GEOMETRY}};            puts {{MACRO "
           f"{n}_CLASSIC *}} }} ]")
    return [
        f"Tcl2 proc {n}_CoordSysRemover {{}} {{   global FME_CoordSys;   set FME_CoordSys {{}}; }}",
        f"MACRO {n}_XML     NOT_ACTIVATED", f"MACRO {n}_CLASSIC NOT_ACTIVATED",
        f"MACRO {n}_2D3D    2D_GEOMETRY", f"MACRO {n}_COORDS  <Unused>",
        f"INCLUDE [ if {{ {{Geometry Object}} == {{Geometry Object}} }} {{            puts "
        f"{{MACRO {n}_XML *}} }} ]",
        f"INCLUDE [ if {{ {{Geometry Object}} == {{2D Coordinate List}} }} {{            puts "
        f"{{MACRO {n}_2D3D 2D_GEOMETRY}};            puts {{MACRO {n}_CLASSIC *}} }} ]",
        f"INCLUDE [ if {{ {{Geometry Object}} == {{3D Coordinate List}} }} {{            puts "
        f"{{MACRO {n}_2D3D 3D_GEOMETRY}};            puts {{MACRO {n}_CLASSIC *}} }} ]",
        box,
        f"FACTORY_DEF {{$({n}_XML)}} CreationFactory    FACTORY_NAME {{ {n}_XML_Creator }}    "
        f"CREATE_AT_END {{ no }}    OUTPUT {{ FEATURE_TYPE _____CREATED______        "
        f"@Geometry(FROM_ENCODED_STRING,{encode_fme(_NULL_GEOMETRY)}) }}",
        f"FACTORY_DEF {{$({n}_CLASSIC)}} CreationFactory    FACTORY_NAME {{ {n}_CLASSIC_Creator"
        f" }}    $({n}_2D3D) {{ $({n}_COORDS) }}    CREATE_AT_END {{ no }}    OUTPUT {{ "
        f"FEATURE_TYPE _____CREATED______ }}",
        f"FACTORY_DEF {{*}} TeeFactory    FACTORY_NAME {{ {n}_Cloner }}    INPUT FEATURE_TYPE "
        f"_____CREATED______        @Tcl2({n}_CoordSysRemover)        @CoordSys()    "
        f"NUMBER_OF_COPIES {{ 1 }}    OUTPUT {{ FEATURE_TYPE {n}_CREATED        "
        f"fme_feature_type {n}         }}",
        f'FACTORY_DEF * BranchingFactory   FACTORY_NAME "{n}_CREATED Brancher -1 4"   INPUT '
        f'FEATURE_TYPE {n}_CREATED   TARGET_FACTORY "$(WB_CURRENT_CONTEXT)_CREATOR_BRANCH_'
        f'TARGET"   MAXIMUM_COUNT None   OUTPUT PASSED FEATURE_TYPE *']


def _caller_block(spec: WorkspaceSpec, caller: _Node) -> List[str]:
    """PythonCaller version 4 as a 2022.1.3 save writes it: one port, FMEOBJECTS namespace."""
    return [
        'FME_PYTHON_PATH "$(FME_MF_DIR)"',
        f"FACTORY_DEF {{*}} PythonFactory    FACTORY_NAME {{ {caller.xformer_name} }}    "
        f"FLUSH_WHEN_GROUPS_CHANGE {{ <Unused> }}    INPUT  FEATURE_TYPE Creator_CREATED    "
        f"SYMBOL_NAME {{ {spec.symbol} }}    PYTHON_NAMESPACE FMEOBJECTS    SOURCE_CODE {{ "
        f"{encode_fme(spec.script)} }}    OUTPUT {{ PYOUTPUT FEATURE_TYPE "
        f"{caller.xformer_name}_OUTPUT         }}"]


def _tester_block(tester: _Node) -> List[str]:
    """Tester version 3 as a 2021.2 save writes it, with both of its ports connected."""
    n = tester.xformer_name
    return [
        f"FACTORY_DEF {{*}} TestFactory    FACTORY_NAME {{ {n} }}    INPUT  FEATURE_TYPE "
        f'PythonCaller_OUTPUT    TEST {{ fme_rejection_code ATTRIBUTE_HAS_A_VALUE "" ENCODED }}'
        f'    BOOLEAN_OPERATOR {{ OR }}    COMPOSITE_TEST_EXPR {{ "1" }}    '
        f"FEATURE_TABLE_SHIM_SUPPORT Yes    PRESERVE_FEATURE_ORDER {{ PER_OUTPUT_PORT }}    "
        f"OUTPUT {{ PASSED FEATURE_TYPE {n}_PASSED         }}    OUTPUT {{ FAILED "
        f"FEATURE_TYPE {n}_FAILED         }}"]

