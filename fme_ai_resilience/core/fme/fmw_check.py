"""Checks a workspace file (``.fmw``) against what FME really writes, whatever release saved it.

The rules come from real saved files (docs/fme-flow.md) and hold on every
sample from FME 2021.2 to 2025.2 (PythonCaller v4, v6 and v7), except where a file breaks one
on purpose: Workbench's default of an unconnected ``<Rejected>`` port under
``TERMINATE_REJECTED="YES"`` is reported, because it compiles to an ``@Abort`` that fails the
whole job on the first rejected feature. :func:`check_workspace` returns one
:class:`Problem` per broken rule; an empty list means the file passes.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from ..errors import ConfigurationError
from .fmw import COMMON_ATTRIBUTES, SECTIONS
from .fmw_encoding import decode_fme, encode_fme

__all__ = ["Problem", "check_workspace", "RULES"]

#: Every rule, by the name a :class:`Problem` carries.
RULES = {
    "text": "UTF-8 text with LF line endings",
    "header": "the #! header's first lines, its end, and XML once '#! ' is stripped",
    "attributes": "the 48 common WORKSPACE attributes, in alphabetical order",
    "sections": "the 16 header sections, in order",
    "identifiers": "IDENTIFIERs unique across the main document",
    "links": "every link joins existing transformers or feature types, from a port they have",
    "build": "FME_BUILD_NUM is the build in LAST_SAVE_BUILD; the mapping repeats both",
    "python": "FME_PYTHON_VERSION equals PYTHON_COMPATIBILITY",
    "script": "each PythonCaller's script is in FME's encoding, in both copies, and compiles",
    "expected-script": "the PythonCaller's script is exactly the given script",
    "rejected": "each transformer's <Rejected> is connected, or TERMINATE_REJECTED is NO",
    "parameters": "each published parameter has its PARAMETER_INFO and DEFAULT_MACRO",
    "expected-parameters": "the published parameters are exactly the given ones",
}

_XML_DECLARATION = '#! <?xml version="1.0" encoding="UTF-8" ?>'
_BUILD = re.compile(r"FME\(R\) (\d{4}\.\d+\.\d+\.\d+) \(\d{8} - Build (\d+) - [A-Za-z0-9_]+\)")
_ATTRIBUTE_LINE = re.compile(r"#!   ([A-Z0-9_]+)=")
_PORT = re.compile(r"fo (\d+) (.*)")
_TARGET = re.compile(r"fi \d+ .*")
_PYTHON_FACTORY = re.compile(r"FACTORY_DEF \S+ PythonFactory\s.*?FACTORY_NAME \{ (\S+) \}")
_SOURCE_CODE = re.compile(r"\bSOURCE_CODE \{ (\S*) \}")
_DEFAULT_MACRO = re.compile(r"DEFAULT_MACRO (\S+)(?: (.*))?")


@dataclass(frozen=True)
class Problem:
    """One broken rule: ``rule`` is a key of :data:`RULES`, ``message`` says where and what."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


@dataclass(frozen=True)
class _Parsed:
    root: ET.Element
    attribute_order: Tuple[str, ...]
    body: Tuple[str, ...]


def check_workspace(text: str, expected_script: Optional[str] = None,
                    expected_parameters: Optional[Mapping[str, str]] = None) -> List[Problem]:
    """The problems of the workspace ``text`` (empty: it passes).

    With ``expected_script``, every enabled PythonCaller must run exactly that script (and
    there must be one); with ``expected_parameters`` (name -> default value, in order), the
    published parameters must be exactly those.
    """
    if not isinstance(text, str):
        raise ConfigurationError("text", type(text).__name__, "must be the file's text (str)")
    problems: List[Problem] = []
    if "\r" in text:
        problems.append(Problem("text", "has CR characters: FME writes LF line endings"))
    parsed = _parse(text, problems)
    if parsed is None:
        return problems
    root = parsed.root
    _check_attributes(root, parsed.attribute_order, problems)
    sections = [child.tag for child in root]
    if sections != list(SECTIONS):
        problems.append(Problem("sections", f"sections are {sections}, expected "
                                            f"{list(SECTIONS)}"))
    transformers = _children(root, "TRANSFORMERS")
    _check_identifiers(root, problems)
    _check_links(root, transformers, problems)
    _check_build(root, parsed.body, problems)
    callers = [t for t in transformers if t.get("TYPE") == "PythonCaller"]
    _check_scripts(callers, parsed.body, expected_script, problems)
    _check_rejected(root, transformers, problems)
    _check_parameters(root, parsed.body, expected_parameters, problems)
    return problems


def _children(root: ET.Element, section: str) -> List[ET.Element]:
    element = root.find(section)
    return list(element) if element is not None else []


def _parse(text: str, problems: List[Problem]) -> Optional[_Parsed]:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[0] != _XML_DECLARATION or len(lines) < 2 or lines[1] != "#! <WORKSPACE":
        problems.append(Problem("header", f"the file must start with {_XML_DECLARATION!r} "
                                          f"and '#! <WORKSPACE'"))
        return None
    try:
        end = lines.index("#! </WORKSPACE>")
    except ValueError:
        problems.append(Problem("header", "no '#! </WORKSPACE>' line ends the header"))
        return None
    xml_lines: List[str] = []
    order: List[str] = []
    in_start_tag = True
    for number, line in enumerate(lines[:end + 1], start=1):
        if line.startswith("#! ") or line == "#!":
            xml_lines.append(line[3:])
            if in_start_tag and number > 2:
                if line == "#! >":
                    in_start_tag = False
                else:
                    match = _ATTRIBUTE_LINE.match(line)
                    if match:
                        order.append(match.group(1))
        elif line.startswith("#"):
            xml_lines.append("")  # the command-line note: a comment, not XML
        else:
            problems.append(Problem("header", f"line {number} is inside the header but is "
                                              f"not a '#!' line"))
            return None
    document = "\n".join(xml_lines)
    if "<!DOCTYPE" in document or "<!ENTITY" in document:
        # FME writes neither; refusing them keeps entity expansion out of the parser
        problems.append(Problem("header", "the header declares a DOCTYPE or an ENTITY"))
        return None
    try:
        root = ET.fromstring(document)
    except ET.ParseError as exc:
        problems.append(Problem("header", f"the header is not well-formed XML: {exc}"))
        return None
    if root.tag != "WORKSPACE":
        problems.append(Problem("header", f"the header's root is <{root.tag}>, not <WORKSPACE>"))
        return None
    return _Parsed(root, tuple(order), tuple(lines[end + 1:]))


def _check_attributes(root: ET.Element, order: Sequence[str], problems: List[Problem]) -> None:
    missing = [name for name in COMMON_ATTRIBUTES if name not in root.attrib]
    if missing:
        problems.append(Problem("attributes", f"WORKSPACE lacks {', '.join(missing)}"))
    if list(order) != sorted(order):
        wrong = next(b for a, b in zip(order, order[1:]) if b < a)
        problems.append(Problem("attributes", f"WORKSPACE attributes are not in alphabetical "
                                              f"order (first out of place: {wrong})"))
    if set(order) != set(root.attrib):
        problems.append(Problem("attributes", "WORKSPACE attributes must be written one per "
                                              "line as '#!   NAME=\"value\"'"))


def _check_identifiers(root: ET.Element, problems: List[Problem]) -> None:
    seen: Dict[str, str] = {}
    for section in ("FEATURE_TYPES", "COMMENTS", "BOOKMARKS", "TRANSFORMERS", "FEAT_LINKS"):
        for element in _children(root, section):
            identifier = element.get("IDENTIFIER")
            if identifier is None:
                continue
            if identifier in seen:
                problems.append(Problem("identifiers", f"IDENTIFIER {identifier} is used by a "
                                                       f"{seen[identifier]} and a {element.tag}"))
            seen[identifier] = element.tag


def _name_of(transformer: ET.Element) -> str:
    for parm in transformer.findall("XFORM_PARM"):
        if parm.get("PARM_NAME") == "XFORMER_NAME":
            return parm.get("PARM_VALUE") or ""
    return transformer.get("IDENTIFIER") or "?"


def _parms(transformer: ET.Element) -> Dict[str, str]:
    return {p.get("PARM_NAME") or "": p.get("PARM_VALUE") or ""
            for p in transformer.findall("XFORM_PARM")}


def _outputs(transformer: ET.Element) -> List[str]:
    return [o.get("NAME") or "" for o in transformer.findall("OUTPUT_FEAT")]


def _check_links(root: ET.Element, transformers: Sequence[ET.Element],
                 problems: List[Problem]) -> None:
    by_id = {t.get("IDENTIFIER"): t for t in transformers}
    feature_types = {f.get("IDENTIFIER") for f in _children(root, "FEATURE_TYPES")}
    for link in _children(root, "FEAT_LINKS"):
        where = f"link {link.get('IDENTIFIER')}"
        source, target = link.get("SOURCE_NODE"), link.get("TARGET_NODE")
        port, target_port = link.get("SOURCE_PORT_DESC") or "", link.get("TARGET_PORT_DESC") or ""
        if source in by_id:
            problem = _port_problem(by_id[source], port)
            if problem:
                problems.append(Problem("links", f"{where}: {problem}"))
        elif source in feature_types:
            if not re.fullmatch(r"-?\d+", port):
                problems.append(Problem("links", f"{where}: a feature type's port is a "
                                                 f"number, not {port!r}"))
        else:
            problems.append(Problem("links", f"{where} starts at {source}, which is no "
                                             f"transformer or feature type"))
        if target in by_id:
            if not _TARGET.fullmatch(target_port):
                problems.append(Problem("links", f"{where}: target port {target_port!r} is "
                                                 f"not 'fi N NAME'"))
        elif target in feature_types:
            if not re.fullmatch(r"-?\d+", target_port):
                problems.append(Problem("links", f"{where}: a feature type's port is a "
                                                 f"number, not {target_port!r}"))
        else:
            problems.append(Problem("links", f"{where} ends at {target}, which is no "
                                             f"transformer or feature type"))


def _port_problem(transformer: ET.Element, port: str) -> Optional[str]:
    match = _PORT.fullmatch(port)
    name = _name_of(transformer)
    if not match:
        return f"source port {port!r} of {name} is not 'fo N NAME'"
    index, encoded = int(match.group(1)), match.group(2)
    outputs = _outputs(transformer)
    if index >= len(outputs):
        return f"{name} has no output port {index} ({port!r}; it has {outputs})"
    try:
        expected = encode_fme(outputs[index])
    except ConfigurationError:
        expected = outputs[index]
    if encoded != expected:
        return f"port {index} of {name} is {outputs[index]!r}, the link names {encoded!r}"
    return None


def _check_build(root: ET.Element, body: Sequence[str], problems: List[Problem]) -> None:
    saved = root.get("LAST_SAVE_BUILD") or ""
    match = _BUILD.fullmatch(saved)
    if not match:
        problems.append(Problem("build", f"LAST_SAVE_BUILD {saved!r} is not "
                                         f"'FME(R) YYYY.x.y.z (DATE - Build N - PLATFORM)'"))
    elif root.get("FME_BUILD_NUM") != match.group(2):
        problems.append(Problem("build", f"FME_BUILD_NUM {root.get('FME_BUILD_NUM')!r} is not "
                                         f"the build {match.group(2)} in LAST_SAVE_BUILD"))
    repeated = [line for line in body if line.startswith("LAST_SAVE_BUILD ")]
    wanted = f'LAST_SAVE_BUILD "{saved.replace("FME(R)", "FME", 1)}"'
    if repeated != [wanted]:
        problems.append(Problem("build", f"the mapping must repeat {wanted!r} once"))
    versions = [line.split(" ", 1)[1] for line in body if line.startswith("FME_PYTHON_VERSION ")]
    if versions != [root.get("PYTHON_COMPATIBILITY")]:
        problems.append(Problem("python", f"FME_PYTHON_VERSION {versions} does not match "
                                          f"PYTHON_COMPATIBILITY "
                                          f"{root.get('PYTHON_COMPATIBILITY')!r}"))


def _mapping_scripts(body: Sequence[str]) -> Dict[str, List[str]]:
    """The encoded SOURCE_CODE of every PythonFactory with one, by factory name."""
    found: Dict[str, List[str]] = {}
    for line in body:
        factory = _PYTHON_FACTORY.match(line)
        source = _SOURCE_CODE.search(line) if factory else None
        if factory and source:
            found.setdefault(factory.group(1), []).append(source.group(1))
    return found


def _decoded(encoded: str, what: str, problems: List[Problem]) -> Optional[str]:
    try:
        script = decode_fme(encoded)
    except ConfigurationError as exc:
        problems.append(Problem("script", f"{what} is not in FME's encoding: {exc.reason} "
                                          f"({exc.value})"))
        return None
    try:
        canonical = encode_fme(script) == encoded
    except ConfigurationError:
        canonical = True  # a character we do not write ourselves: FME's own choice stands
    if not canonical:
        problems.append(Problem("script", f"{what} is not encoded the way FME encodes it"))
    return script


def _check_scripts(callers: Sequence[ET.Element], body: Sequence[str],
                   expected: Optional[str], problems: List[Problem]) -> None:
    mapping = _mapping_scripts(body)
    enabled = [c for c in callers if c.get("ENABLED", "true") != "false"]
    if expected is not None and not enabled:
        problems.append(Problem("expected-script", "the workspace has no enabled PythonCaller"))
    for caller in enabled:
        name = _name_of(caller)
        header = _parms(caller).get("PYTHONSOURCE")
        copies = mapping.get(name, [])
        if header is None:
            problems.append(Problem("script", f"PythonCaller {name} has no PYTHONSOURCE"))
            continue
        if len(copies) != 1:
            problems.append(Problem("script", f"PythonCaller {name} has {len(copies)} "
                                              f"PythonFactory SOURCE_CODE copies, expected 1"))
            continue
        script = _decoded(header, f"the header script of {name}", problems)
        body_script = _decoded(copies[0], f"the mapping script of {name}", problems)
        if script is None or body_script is None:
            continue
        if script != body_script:
            problems.append(Problem("script", f"the two copies of {name}'s script differ"))
            continue
        try:
            compile(script, name, "exec")
        except (SyntaxError, ValueError) as exc:
            problems.append(Problem("script", f"the script of {name} does not compile: {exc}"))
        if expected is not None and script != expected:
            at = _first_difference(script, expected)
            problems.append(Problem("expected-script", f"{name} runs another script than "
                                                       f"expected (first difference at "
                                                       f"character {at})"))


def _first_difference(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _check_rejected(root: ET.Element, callers: Sequence[ET.Element],
                    problems: List[Problem]) -> None:
    if (root.get("TERMINATE_REJECTED") or "").upper() == "NO":
        return
    links = _children(root, "FEAT_LINKS")
    for transformer in callers:
        if transformer.get("ENABLED", "true") == "false":
            continue
        outputs = _outputs(transformer)
        ports = [i for i, name in enumerate(outputs) if name.upper() == "<REJECTED>"]
        if not ports:
            continue  # PythonCaller v4 and older have no <Rejected> port
        fed = any(link.get("TARGET_NODE") == transformer.get("IDENTIFIER") for link in links)
        if not fed and transformer.get("TYPE") != "PythonCaller":
            continue  # nothing flows in: FME compiles no factory for it at all
        index = ports[0]
        connected = any(link.get("SOURCE_NODE") == transformer.get("IDENTIFIER")
                        and _PORT.fullmatch(link.get("SOURCE_PORT_DESC") or "")
                        and (link.get("SOURCE_PORT_DESC") or "").split(" ", 2)[1] == str(index)
                        for link in links)
        if not connected:
            problems.append(Problem("rejected", f"{transformer.get('TYPE')} "
                                                f"{_name_of(transformer)}'s {outputs[index]} "
                                                f"is not connected and TERMINATE_REJECTED is "
                                                f"YES: FME compiles an @Abort, so the first "
                                                f"rejected feature fails the whole job"))


def _form_parameters(root: ET.Element, problems: List[Problem]) -> Optional[List[Tuple[str, str]]]:
    section = root.find("USER_PARAMETERS")
    form = section.get("FORM") if section is not None else None
    if form is None:
        problems.append(Problem("parameters", "USER_PARAMETERS has no FORM"))
        return None
    try:
        decoded = json.loads(base64.b64decode(form, validate=True).decode("utf-8"))
        entries = list(_flatten(decoded["parameters"]))
    except (binascii.Error, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        problems.append(Problem("parameters", f"FORM is not base64 of {{\"parameters\": "
                                              f"[...]}}: {type(exc).__name__}"))
        return None
    return [(str(p.get("name")), _text(p.get("defaultValue", ""))) for p in entries]


def _flatten(parameters: Any) -> Iterator[Mapping[str, Any]]:
    for p in parameters:
        if p.get("type") == "group":
            yield from _flatten(p.get("parameters", []))
        else:
            yield p


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _check_parameters(root: ET.Element, body: Sequence[str],
                      expected: Optional[Mapping[str, str]], problems: List[Problem]) -> None:
    form = _form_parameters(root, problems)
    if form is None:
        return
    section = root.find("USER_PARAMETERS")
    info = {i.get("NAME"): i for i in (section.find("PARAMETER_INFO") if section is not None
                                       and section.find("PARAMETER_INFO") is not None else [])}
    head = body[:next((i for i, line in enumerate(body) if line == "#! START_HEADER"),
                      len(body))]
    macros = {}
    for line in head:
        match = _DEFAULT_MACRO.fullmatch(line)
        if match:
            macros[match.group(1)] = match.group(2) or ""
    scripted = "\n".join(head)
    for name, default in form:
        if name not in info:
            problems.append(Problem("parameters", f"{name} has no PARAMETER_INFO entry"))
        elif info[name].get("DEFAULT_VALUE") not in (None, default):
            problems.append(Problem("parameters", f"{name}'s PARAMETER_INFO default is not "
                                                  f"the FORM's"))
        if name in macros:
            if macros[name] != default:
                problems.append(Problem("parameters", f"DEFAULT_MACRO {name} is not the "
                                                      f"FORM's default"))
        elif f"macroName = '{name}'" not in scripted:
            problems.append(Problem("parameters", f"{name} has no DEFAULT_MACRO"))
    if expected is not None:
        _compare_parameters(form, [(str(k), str(v)) for k, v in expected.items()], problems)


def _compare_parameters(found: Sequence[Tuple[str, str]], wanted: Sequence[Tuple[str, str]],
                        problems: List[Problem]) -> None:
    """Names in order, then defaults; a value found in the file is never quoted (it may be a
    secret someone typed in), only the expected one."""
    names, wanted_names = [n for n, _ in found], [n for n, _ in wanted]
    if names != wanted_names:
        problems.append(Problem("expected-parameters", f"published parameters are {names}, "
                                                       f"expected {wanted_names}"))
        return
    for (name, default), (_, expected) in zip(found, wanted):
        if default != expected:
            problems.append(Problem("expected-parameters", f"{name}'s default is not the "
                                                           f"expected {expected!r}"))
