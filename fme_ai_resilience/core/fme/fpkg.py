"""The FME Package (``.fpkg``): what goes into it, as text and bytes, nothing written here.

An FME Package is FME's own way to ship Python to FME Form and FME Flow engines: one upload,
a version, and native transformers with parameter forms instead of pasted scripts. This one
holds ``package.yml``, README, CHANGES, an icon, three Python-based transformers (``.fmxj``
with a help page each) that wrap the callers, and ``python/`` with the library's wheel and
its dependencies, pure Python only: FME installs the listed wheels into its own Python and
downloads nothing, and a compiled file would fit one interpreter and platform only.

What the package leaves to FME: ``requests``, ``urllib3`` and ``certifi``, which FME bundles
(a copy in the package would shadow FME's own). The JSON Schema validator is jsonschema
4.17.3, the last release whose whole tree (attrs, pyrsistent) is pure Python; the ledger's
PostgreSQL driver is pg8000.

Each transformer hands its parameters to Python as ``___XF_<NAME>`` attributes (the names of
the workspace's published parameters), and every feature leaves the Python factory through
one port; the transformer's template routes those with ``fme_rejection_code`` set to
``<Rejected>``. The processor's and compensator's transformers, like the templates, run once
per input feature (a Creator or a schedule's feature).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from ..errors import ConfigurationError
from .parameters import COMPENSATOR, INTAKE, PROCESSOR, parameters_for

__all__ = ["PUBLISHER_UID", "PACKAGE_UID", "PACKAGE_NAME", "MINIMUM_FME_BUILD", "PARAMETER_PREFIX",
           "Transformer", "TRANSFORMERS", "PURE_REQUIREMENTS", "LEFT_TO_FME",
           "COMPILED_SUFFIXES", "fpkg_filename", "fq_name", "package_yml", "fmxj",
           "transformer_help", "readme", "changes", "icon_png", "compiled_files",
           "wheel_distribution", "is_pure_wheel"]

PUBLISHER_UID = "fair"
PACKAGE_UID = "fme-ai-resilience"
PACKAGE_NAME = "FME AI Resilience"
#: Python-based transformers (``.fmxj``) need FME 2023.0, build 23146.
MINIMUM_FME_BUILD = 23146
#: The prefix FME gives a transformer's parameters when it puts them on the feature.
PARAMETER_PREFIX = "___XF_"
#: The dependencies the package ships, each a pure-Python wheel (see the module docstring).
PURE_REQUIREMENTS = ("jsonschema==4.17.3", "pg8000>=1.29", "waitress>=3.0")
#: What FME brings itself; the package ships none of them.
LEFT_TO_FME = ("requests", "urllib3", "certifi", "idna", "charset_normalizer")
#: File suffixes of compiled code inside a wheel (bytecode included: it fits one interpreter).
COMPILED_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".exe", ".pyc", ".pyo")
_FMXJ_VERSION = 23146


@dataclass(frozen=True)
class Transformer:
    """One native transformer: its short name, the workspace whose caller it wraps, the
    class FME runs and its tooltip."""

    name: str
    workspace: str
    symbol: str
    description: str


TRANSFORMERS: Tuple[Transformer, ...] = (
    Transformer("FairIntake", INTAKE, "fme_ai_resilience.fme.transformers.IntakeTransformer",
                "Registers each Survey123 webhook body's photos in the ledger (WS-01)."),
    Transformer("FairProcessor", PROCESSOR,
                "fme_ai_resilience.fme.transformers.ProcessorTransformer",
                "Works the ledger's due tasks through download, Vision AI and write-back "
                "(WS-02)."),
    Transformer("FairCompensator", COMPENSATOR,
                "fme_ai_resilience.fme.transformers.CompensatorTransformer",
                "Reaps, requeues, evaluates the breakers, reconciles and alerts (WS-03)."),
)


def fq_name(transformer: Transformer) -> str:
    """The transformer's name inside FME: ``publisher.package.Name``."""
    return f"{PUBLISHER_UID}.{PACKAGE_UID}.{transformer.name}"


def fpkg_filename(version: str) -> str:
    """``fair.fme-ai-resilience-<version>.fpkg``, as Safe's packager names a package."""
    return f"{PUBLISHER_UID}.{PACKAGE_UID}-{version}.fpkg"


def _check_version(version: str) -> str:
    parts = version.split(".") if isinstance(version, str) else []
    if len(parts) != 3 or not all(p.isdigit() and p.isascii() for p in parts):
        raise ConfigurationError("version", version, "must be MAJOR.MINOR.PATCH digits")
    return version


def package_yml(version: str, python_packages: Sequence[str]) -> str:
    """``package.yml`` (fme-packager's ``spec.json``): the three transformers and every
    wheel's distribution name, the library's first."""
    lines = ["fpkg_version: 1", f"uid: {PACKAGE_UID}", f"publisher_uid: {PUBLISHER_UID}",
             f"name: {PACKAGE_NAME}",
             "description: Lose no Survey123 submission between FME Flow and a Vision AI "
             "service; native transformers for intake, processing and compensation.",
             f"version: {_check_version(version)}", f"minimum_fme_build: {MINIMUM_FME_BUILD}",
             "author:", "  name: fme-ai-resilience", "package_content:", "  transformers:"]
    for t in TRANSFORMERS:
        lines += [f"    - name: {t.name}", "      version: 1"]
    lines.append("  python_packages:")
    lines += [f"    - name: {name}" for name in python_packages]
    return "\n".join(lines) + "\n"


def _parameter(p: Any) -> Dict[str, Any]:
    entry: Dict[str, Any] = {"name": PARAMETER_PREFIX + p.name, "prompt": p.prompt,
                             "valueType": "string", "defaultValue": p.default,
                             "required": bool(p.required)}
    if p.secret:
        entry.update({"type": "password", "showConfirm": False})
    else:
        entry["type"] = "text"
    return entry


def _attributes(names: Sequence[str]) -> List[Dict[str, str]]:
    return [{"name": name, "type": "buffer"} for name in names]


def fmxj(transformer: Transformer, attributes: Sequence[str]) -> Dict[str, Any]:
    """The ``.fmxj`` definition of ``transformer``: its parameter form (the workspace's
    published parameters, secrets as password fields), the template that passes them to the
    Python class and routes ``fme_rejection_code`` to ``<Rejected>``, and its ports with every
    attribute the caller sets (``attributes``) in ``attributesAdded``."""
    name = fq_name(transformer)
    template = [
        "# The parameters onto the input feature, as ___XF_ attributes.",
        "FACTORY_DEF {*} TeeFactory",
        "   FACTORY_NAME { $(XFORMER_NAME)_PARAMETERS }",
        "   $(INPUT_LINES)",
        "   OUTPUT { FEATURE_TYPE $(XFORMER_NAME)_READY",
        "      $(FME_PARM_VAL_LIST)",
        "   }",
        "# The library's class handles each feature.",
        "FACTORY_DEF {*} PythonFactory",
        "    FACTORY_NAME { $(XFORMER_NAME) }",
        "    INPUT { FEATURE_TYPE $(XFORMER_NAME)_READY }",
        f"    SYMBOL_NAME {transformer.symbol}",
        "    OUTPUT { PYOUTPUT FEATURE_TYPE $(XFORMER_NAME)_PROCESSED }",
        "# What carries fme_rejection_code leaves through <Rejected>, the rest through Output.",
        "FACTORY_DEF {*} TestFactory",
        "    FACTORY_NAME { $(XFORMER_NAME)_ROUTER }",
        "    INPUT { FEATURE_TYPE $(XFORMER_NAME)_PROCESSED }",
        '    TEST &fme_rejection_code == ""',
        "    OUTPUT { PASSED FEATURE_TYPE $(OUTPUT_Output_FTYPE)",
        "        @RemoveAttributes(fme_regexp_match,^___XF_.*$)",
        "        $(OUTPUT_Output_FUNCS) }",
        "    OUTPUT { FAILED FEATURE_TYPE $(OUTPUT_<REJECTED>_FTYPE)",
        "        @RemoveAttributes(fme_regexp_match,^___XF_.*$)",
        "        $(OUTPUT_<REJECTED>_FUNCS) }",
    ]
    form = {"parameters": [
        {"name": "TRANSFORMER_GROUP", "prompt": "", "type": "group", "valueType": "string",
         "parameters": [{"name": "XFORMER_NAME", "prompt": "Transformer Name",
                         "type": "text", "valueType": "string", "defaultValue": name}]},
        {"name": "PARAMETERS_GROUP", "prompt": "Parameters", "type": "group",
         "valueType": "string", "required": False, "defaultValue": "<Unused>",
         "parameters": [_parameter(p) for p in parameters_for(transformer.workspace)]},
    ]}
    return {
        "fmxjVersion": _FMXJ_VERSION,
        "info": {"name": name, "categories": ["Integrations"]},
        "versions": [{
            "version": 1, "description": transformer.description,
            "changeLog": ["Initial version"], "executionTemplate": template,
            "featureHolding": "none", "form": form, "pythonCompatability": "39",
            "inputPorts": [{"name": ""}],
            "outputPorts": [
                {"name": "Output", "attributesAdded": _attributes(attributes)},
                {"name": "<REJECTED>", "attributesAdded": _attributes(
                    [*attributes, "fme_rejection_code", "fme_rejection_message"])}],
        }],
    }


def transformer_help(transformer: Transformer, attributes: Sequence[str]) -> str:
    """The transformer's help page (Markdown)."""
    rows = "\n".join(f"| {p.name} | {p.prompt} | {'password' if p.secret else 'text'} | "
                     f"{'yes' if p.required else 'no'} |"
                     for p in parameters_for(transformer.workspace))
    return (f"# {transformer.name}\n\n{transformer.description}\n\n"
            f"It runs `{transformer.symbol}` of the fme-ai-resilience library, the same logic "
            f"as the `{transformer.workspace}` template's PythonCaller.\n\n"
            "## Parameters\n\nBlank optional parameters take the library's defaults. Secrets "
            "are password fields; keep their values in FME Flow deployment parameters or web "
            "connections rather than typed into a job.\n\n"
            "| parameter | prompt | type | required |\n| --- | --- | --- | --- |\n"
            f"{rows}\n\n## Output ports\n\n"
            "- **Output**: one new feature per result, with these attributes: "
            f"{', '.join(f'`{a}`' for a in attributes)}.\n"
            "- **<Rejected>**: only what no retry can fix (a configuration that cannot work, "
            "an invalid body, a dead letter the compensator never requeues), with "
            "`fme_rejection_code` and `fme_rejection_message`. Everything retryable stays in "
            "the ledger and leaves through Output.\n")


def readme(version: str) -> str:
    """The package's README."""
    names = ", ".join(t.name for t in TRANSFORMERS)
    return (f"# {PACKAGE_NAME} {_check_version(version)}\n\n"
            "Keeps a Survey123 -> FME Flow -> Vision AI pipeline whole under bursts, duplicates "
            "and outages: a ledger of every photo, time limits, retries, a shared circuit "
            "breaker and backpressure.\n\n"
            f"Transformers: {names}. They hold the logic of the WS-01, WS-02 and WS-03 "
            "templates' PythonCallers.\n\nThe Python wheels are pure Python: the library, "
            "jsonschema 4.17.3 (with attrs and pyrsistent), pg8000 for a PostgreSQL ledger and "
            "their dependencies. FME's own requests, urllib3 and certifi are used.\n")


def changes(version: str) -> str:
    """The package's CHANGES."""
    return f"# Changes\n\n## {_check_version(version)}\n\n- The three transformers.\n"


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (len(data).to_bytes(4, "big") + kind + data
            + (zlib.crc32(kind + data) & 0xFFFFFFFF).to_bytes(4, "big"))


def icon_png(size: int = 256) -> bytes:
    """A square PNG icon (FME wants at least 200 x 200): a ring on a blue ground."""
    if not isinstance(size, int) or size < 200:
        raise ConfigurationError("size", size, "must be a whole number >= 200")
    rows = bytearray()
    centre, outer, inner = (size - 1) / 2, size * 0.42, size * 0.28
    for y in range(size):
        rows.append(0)
        for x in range(size):
            d = ((x - centre) ** 2 + (y - centre) ** 2) ** 0.5
            rows += bytes((255, 255, 255)) if inner <= d <= outer else bytes((22, 82, 160))
    header = size.to_bytes(4, "big") * 2 + bytes((8, 2, 0, 0, 0))  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(bytes(rows), 9)) + _png_chunk(b"IEND", b""))


def wheel_distribution(filename: str) -> str:
    """A wheel file's distribution name (``jsonschema-4.17.3-py3-none-any.whl`` ->
    ``jsonschema``)."""
    if not isinstance(filename, str) or not filename.endswith(".whl") or "-" not in filename:
        raise ConfigurationError("wheel", filename, "is not a wheel file name")
    return filename.split("-", 1)[0]


def is_pure_wheel(filename: str) -> bool:
    """Whether a wheel's tags say pure Python (``-none-any.whl``)."""
    return filename.endswith("-none-any.whl")


def compiled_files(names: Sequence[str]) -> List[str]:
    """The members of an archive (names) that are compiled code."""
    return [n for n in names if n.lower().endswith(COMPILED_SUFFIXES)]
