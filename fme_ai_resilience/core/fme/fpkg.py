"""The FME Package (``.fpkg``): what goes into it, as text and bytes, nothing written here.

An FME Package is FME's own way to ship Python to FME Form and FME Flow engines: one upload,
a version, and native transformers with parameter forms instead of pasted scripts. This one
holds ``package.yml``, README, CHANGES, an icon, three Python-based transformers (``.fmxj``,
:mod:`.fmxj`, with a Quick Add text each) that wrap the callers, their help pages in
``help/`` (:mod:`.fpkg_help`, turned into HTML by Safe's ``fme-packager pack``) and
``python/`` with the library's wheel and its dependencies, pure Python only: FME installs the
listed wheels into its own Python and downloads nothing, and a compiled file would fit one
interpreter and platform only.

Third-party code is pinned (:data:`CONSTRAINTS_FILE`, read with :func:`pinned_versions`):
jsonschema 4.17.3 (the last release whose whole tree, attrs and pyrsistent, is pure Python),
pg8000 for the ledger, and Safe's fmetools, vendored inside the library's wheel
(``fme_ai_resilience._vendor.fmetools``) so FME's own HTTP session is used inside FME.
What the package leaves to FME: ``requests``, ``urllib3``, ``certifi`` and ``pypac``
(fmetools' PAC support), which FME bundles; a copy in the package would shadow FME's own.
``waitress`` (the gateway's server) never runs inside FME and is left out.

Each transformer hands its parameters to Python as ``___XF_<NAME>`` attributes (the names of
the workspace's published parameters), and every feature leaves the Python factory through
one port; the transformer's template routes those with ``fme_rejection_code`` set to
``<Rejected>``. The processor's and compensator's transformers, like the templates, run once
per input feature (a Creator or a schedule's feature).
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import Dict, List, Mapping, Sequence, Tuple

from ..errors import ConfigurationError
from .parameters import COMPENSATOR, INTAKE, PROCESSOR

__all__ = ["PUBLISHER_UID", "PACKAGE_UID", "PACKAGE_NAME", "MINIMUM_FME_BUILD", "PARAMETER_PREFIX",
           "Transformer", "TRANSFORMERS", "PURE_REQUIREMENTS", "LEFT_TO_FME",
           "COMPILED_SUFFIXES", "CONSTRAINTS_FILE", "VENDORED", "fpkg_filename", "fq_name",
           "package_yml", "readme", "changes", "icon_png", "compiled_files",
           "wheel_distribution", "wheel_version", "is_pure_wheel", "pinned_versions",
           "canonical_name"]

PUBLISHER_UID = "fair"
PACKAGE_UID = "fme-ai-resilience"
PACKAGE_NAME = "FME AI Resilience"
#: What FME Flow needs for a Python transformer's parameters to be parsed (Safe's
#: packaged-transformer template: build 24145 on FME Flow; FME Form 2023 from 23224).
MINIMUM_FME_BUILD = 24145
#: The prefix FME gives a transformer's parameters when it puts them on the feature.
PARAMETER_PREFIX = "___XF_"
#: The dependencies the package ships, each a pure-Python wheel at the version
#: :data:`CONSTRAINTS_FILE` pins (see the module docstring).
PURE_REQUIREMENTS = ("jsonschema", "pg8000")
#: Third-party code vendored inside the library's wheel, not shipped as a wheel of its own.
VENDORED = ("fmetools",)
#: The pins, in the checkout's root.
CONSTRAINTS_FILE = "fpkg-constraints.txt"
#: What FME brings itself; the package ships none of them.
LEFT_TO_FME = ("requests", "urllib3", "certifi", "idna", "charset_normalizer", "pypac")
#: File suffixes of compiled code inside a wheel (bytecode included: it fits one interpreter).
COMPILED_SUFFIXES = (".so", ".pyd", ".dll", ".dylib", ".exe", ".pyc", ".pyo")


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


def readme(version: str, pins: Mapping[str, str]) -> str:
    """The package's README; ``pins`` are the shipped and vendored third-party versions."""
    names = ", ".join(t.name for t in TRANSFORMERS)
    listed = ", ".join(f"{name} {pins[name]}" for name in sorted(pins))
    return (f"# {PACKAGE_NAME} {_check_version(version)}\n\n"
            "Keeps a Survey123 -> FME Flow -> Vision AI pipeline whole under bursts, duplicates "
            "and outages: a ledger of every photo, time limits, retries, a shared circuit "
            "breaker and backpressure.\n\n"
            f"Transformers: {names}. They hold the logic of the WS-01, WS-02 and WS-03 "
            "templates' PythonCallers. Each help page says how to connect `<Rejected>`, and "
            "`help/fme-ai-resilience-sample.fmw` uses the three with both ports connected.\n\n"
            "The Python wheels are pure Python, third-party code at pinned versions: "
            f"{listed} (fmetools inside the library's wheel, for FME's own HTTP session). "
            "FME's own requests, urllib3, certifi and pypac are used.\n\n"
            "After installing a new version, restart FME Form, and on FME Flow the engines "
            "(or wait for them to restart): an engine keeps the Python modules it has "
            "imported until it restarts.\n")


def changes(version: str) -> str:
    """The package's CHANGES."""
    return (f"# Changes\n\n## {_check_version(version)}\n\n- The three transformers, their "
            "help pages and a sample workspace.\n")


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


def wheel_version(filename: str) -> str:
    """A wheel file's version (``jsonschema-4.17.3-py3-none-any.whl`` -> ``4.17.3``)."""
    parts = filename.split("-") if isinstance(filename, str) else []
    if len(parts) < 5 or not filename.endswith(".whl"):
        raise ConfigurationError("wheel", filename, "is not a wheel file name")
    return parts[1]


def canonical_name(name: str) -> str:
    """A distribution name as packaging compares them (``python_dateutil`` ->
    ``python-dateutil``)."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def pinned_versions(text: str) -> Dict[str, str]:
    """The ``name==version`` lines of a constraints file, by canonical name; raises
    ConfigurationError for a requirement that is not pinned to one version."""
    pins: Dict[str, str] = {}
    for number, raw in enumerate(str(text).splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9_.-]*)==([0-9][A-Za-z0-9.+!-]*)", line)
        if match is None:
            raise ConfigurationError(CONSTRAINTS_FILE, line, f"line {number}: must pin one "
                                     "version, name==version")
        pins[canonical_name(match.group(1))] = match.group(2)
    return pins


def is_pure_wheel(filename: str) -> bool:
    """Whether a wheel's tags say pure Python (``-none-any.whl``)."""
    return filename.endswith("-none-any.whl")


def compiled_files(names: Sequence[str]) -> List[str]:
    """The members of an archive (names) that are compiled code."""
    return [n for n in names if n.lower().endswith(COMPILED_SUFFIXES)]
