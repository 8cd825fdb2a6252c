"""Stand-ins for FME's own Python modules: a feature with FME's attribute semantics, the log, and
``fme.macroValues``, installable in ``sys.modules`` for as long as a test needs them.

:class:`FakeFeature` follows ``fmeobjects.FMEFeature`` as docs/fme-flow.md describes it:

* ``getAttribute(name)`` is None for a missing attribute and ``""`` for a null one;
  ``isAttributeNull`` and ``isAttributeMissing`` tell the two apart;
* ``setAttribute(name, None)`` stores an empty string (not a null); a real null needs
  ``setAttributeNullWithType(name, FME_ATTR_STRING)``;
* a Python ``int`` is stored as FME's Int32: a value outside -2**31 .. 2**31-1 overflows and
  wraps around, as fme.md says it does in FME (store big integers as strings); ``float`` is
  Real64, ``bool`` a boolean, ``bytes`` binary, ``str`` text; a list is a list attribute whose
  elements are stored as text (bytes stay binary); anything else raises ``FMEException``.

``performFunction("@Concatenate(fme_decrypt(...))")`` decrypts what :func:`fme_encrypt` made,
the way FME's own Python decrypts a password parameter that arrives encrypted.

:func:`installed_fme` puts a fake ``fmeobjects`` (``FMEFeature``, ``FMELogFile``,
``FMEException``, ``FMESession`` with FME's network settings as Safe's fmetools reads them,
``FME_ASSEMBLY_VERSION``, the severity and attribute-type constants) and a fake ``fme``
(``macroValues``, ``BaseTransformer``) into ``sys.modules`` and takes them out again,
restoring whatever was there. Several installations may overlap (threads, nested fixtures):
the modules stay until the last one ends. What ``fme.macroValues`` holds and where
``FMELogFile`` writes is the *current* :class:`FakeFME`, set per thread of work, so two runs
in two threads each see their own published parameters and log.
"""
from __future__ import annotations

import base64
import contextlib
import contextvars
import re
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Mapping, Optional

from ..core.errors import ResilienceError
from ..core.fme.fmw_encoding import decode_fme

__all__ = ["FakeFeature", "FakeFME", "LogLine", "FMEException", "installed_fme", "current_fme",
           "macro_strings", "fme_encrypt", "FakeFMESession", "FME_ASSEMBLY_VERSION", "SEVERITIES", "FME_INFORM", "FME_WARN", "FME_ERROR", "FME_FATAL",
           "FME_ATTR_UNDEFINED", "FME_ATTR_STRING", "FME_ATTR_INT32", "FME_ATTR_REAL64",
           "FME_ATTR_BOOLEAN", "FME_ATTR_BINARY", "FME_ATTR_LIST"]

# The values FME gives these constants are its own; tests compare names, never numbers.
FME_INFORM, FME_WARN, FME_ERROR, FME_FATAL = 0, 1, 2, 3
#: The severity names log lines carry, by constant.
SEVERITIES = {FME_INFORM: "INFORM", FME_WARN: "WARN", FME_ERROR: "ERROR", FME_FATAL: "FATAL"}
FME_ATTR_UNDEFINED, FME_ATTR_BOOLEAN, FME_ATTR_INT32, FME_ATTR_REAL64 = 0, 1, 8, 10
FME_ATTR_STRING, FME_ATTR_BINARY, FME_ATTR_LIST = 11, 12, 13
FME_SUPPORT_FEATURE_TABLE_SHIM = 1

#: The release the fake ``fmeobjects`` says it is (fmetools puts it in its User-Agent).
FME_ASSEMBLY_VERSION = "2025.1.0.0"

_INT32 = 2 ** 31


class FMEException(ResilienceError):
    """What the fake ``fmeobjects`` raises where FME raises its ``FMEException``."""


def _int32(value: int) -> int:
    """``value`` as FME's Int32 keeps it: wrapped around past the 32-bit range."""
    return (value + _INT32) % (2 * _INT32) - _INT32


def _stored(name: str, value: Any) -> Any:
    """A Python value as FME stores it (see the module docstring)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _int32(value)
    if isinstance(value, (float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, (list, tuple)):
        return [bytes(v) if isinstance(v, (bytes, bytearray)) else
                ("" if v is None else str(v)) for v in value]
    raise FMEException(f"setAttribute({name!r}): FME cannot store a {type(value).__name__}")


def _type_of(value: Any) -> int:
    if isinstance(value, bool):
        return FME_ATTR_BOOLEAN
    if isinstance(value, int):
        return FME_ATTR_INT32
    if isinstance(value, float):
        return FME_ATTR_REAL64
    if isinstance(value, bytes):
        return FME_ATTR_BINARY
    if isinstance(value, list):
        return FME_ATTR_LIST
    return FME_ATTR_STRING


class FakeFeature:
    """An ``fmeobjects.FMEFeature`` stand-in with FME's null and missing semantics.

    ``attributes`` are set with :meth:`setAttribute` in order (so ``None`` becomes ``""``
    and a big int wraps, as in FME); ``feature_type`` is what ``getFeatureType`` returns.
    """

    def __init__(self, attributes: Optional[Mapping[str, Any]] = None,
                 feature_type: str = "") -> None:
        self._values: Dict[str, Any] = {}
        self._nulls: Dict[str, int] = {}
        self._names: Dict[str, None] = {}    # every attribute's name, in the order first set
        self._feature_type = feature_type
        self._geometry: Any = None
        #: Whether ``setGeometry`` was called (the fake's own, for tests: FME's features
        #: made without one carry an undefined geometry).
        self.geometry_set = False
        for name, value in (attributes or {}).items():
            self.setAttribute(name, value)

    # -- what FMEFeature offers ------------------------------------------------------------
    def getAttribute(self, attrName: str) -> Any:
        """The value; ``""`` for a null attribute, None for a missing one."""
        if attrName in self._nulls:
            return ""
        value = self._values.get(attrName)
        return list(value) if isinstance(value, list) else value

    def setAttribute(self, attrName: str, attrValue: Any) -> None:
        """Set (or overwrite) an attribute as FME stores it; None stores ``""``."""
        stored = _stored(attrName, attrValue)
        self._nulls.pop(attrName, None)
        self._values[attrName] = stored
        self._names[attrName] = None

    def setAttributeNullWithType(self, attrName: str, attrType: int) -> None:
        """Make the attribute a real null of type ``attrType``."""
        self._values.pop(attrName, None)
        self._nulls[attrName] = int(attrType)
        self._names[attrName] = None

    def isAttributeNull(self, attributeName: str) -> bool:
        return attributeName in self._nulls

    def isAttributeMissing(self, attributeName: str) -> bool:
        return attributeName not in self._nulls and attributeName not in self._values

    def getAllAttributeNames(self) -> List[str]:
        """Every attribute's name, null ones included, in the order they were first set."""
        return list(self._names)

    def getAttributeType(self, attrName: str) -> int:
        """The attribute's FME type constant; ``FME_ATTR_UNDEFINED`` when missing."""
        if attrName in self._nulls:
            return self._nulls[attrName]
        if attrName not in self._values:
            return FME_ATTR_UNDEFINED
        return _type_of(self._values[attrName])

    def removeAttribute(self, attrName: str) -> None:
        self._values.pop(attrName, None)
        self._nulls.pop(attrName, None)
        self._names.pop(attrName, None)

    def setGeometry(self, geometry: Any) -> None:
        """Set the geometry (None: a null geometry, as Safe's fmetools sets it)."""
        self._geometry = geometry
        self.geometry_set = True

    def getGeometry(self) -> Any:
        return self._geometry

    def getFeatureType(self) -> str:
        return self._feature_type

    def setFeatureType(self, featureType: str) -> None:
        self._feature_type = str(featureType)

    def clone(self) -> "FakeFeature":
        """A copy with the same attributes, nulls and feature type."""
        copy = FakeFeature(feature_type=self._feature_type)
        copy._values = {k: list(v) if isinstance(v, list) else v
                        for k, v in self._values.items()}
        copy._nulls = dict(self._nulls)
        copy._names = dict(self._names)
        copy._geometry, copy.geometry_set = self._geometry, self.geometry_set
        return copy

    def performFunction(self, functionString: str) -> str:
        """Evaluate an FME function on the feature; the fake knows one, ``@Concatenate(...)``
        of plain text and ``fme_decrypt(...)`` values made by :func:`fme_encrypt` (how FME's
        own Python decrypts a password parameter). Anything else raises FMEException."""
        match = _CONCATENATE.fullmatch(str(functionString).strip())
        if match is None:
            raise FMEException(f"the fake performFunction knows only @Concatenate(...), got "
                               f"{str(functionString)[:40]!r}")
        return _DECRYPT.sub(lambda m: _fake_decrypt(m.group(1)), match.group(1))

    # -- for tests -------------------------------------------------------------------------
    def as_dict(self) -> Dict[str, Any]:
        """Every attribute by name, a null one as None (a missing one is absent)."""
        return {n: None if n in self._nulls else self.getAttribute(n)
                for n in self.getAllAttributeNames()}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        kind = f" {self._feature_type}" if self._feature_type else ""
        return f"<FakeFeature{kind} {shown}>"


_CONCATENATE = re.compile(r"@Concatenate\((.*)\)", re.S)
_DECRYPT = re.compile(r"fme_decrypt\(([A-Za-z0-9+/=]*)\)")
_CIPHER = b"fair-fake-fme-key"
_MAGIC = b"FAIR:"


def _xor(data: bytes) -> bytes:
    return bytes(b ^ _CIPHER[i % len(_CIPHER)] for i, b in enumerate(data))


def fme_encrypt(plain: str) -> str:
    """``plain`` as the fake FME's encrypted parameter value, ``fme_decrypt(...)``: what a
    password parameter typed into Workbench looks like when it reaches Python unread (the
    cipher is the fake's own; only the fake ``performFunction`` reads it back)."""
    sealed = _xor(_MAGIC + str(plain).encode("utf-8"))
    return f"fme_decrypt({base64.b64encode(sealed).decode('ascii')})"


def _fake_decrypt(cipher: str) -> str:
    try:
        opened = _xor(base64.b64decode(cipher, validate=True))
        plain = opened[len(_MAGIC):].decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        opened, plain = b"", ""
    if not opened.startswith(_MAGIC):
        raise FMEException("fme_decrypt: not a value this FME encrypted")
    return plain


@dataclass(frozen=True)
class LogLine:
    """One line written to FME's log: its severity name (INFORM, WARN, ERROR, FATAL) and text."""

    severity: str
    message: str


@dataclass
class FakeFME:
    """What the fake ``fme`` and ``fmeobjects`` hand out: the published parameters
    (``macros``, what ``fme.macroValues`` returns) and the lines ``FMELogFile`` received."""

    macros: Dict[str, str] = field(default_factory=dict)
    log: List[LogLine] = field(default_factory=list)
    #: What ``FMESession().getProperties(category, ...)`` answers, by category (FME's
    #: name/value lists, e.g. ``fme_session_prop_network_proxy``); empty: nothing configured.
    session_properties: Dict[str, List[str]] = field(default_factory=dict)

    def messages(self, severity: Optional[str] = None) -> List[str]:
        """The logged texts, of one severity (``"WARN"``) or all."""
        return [line.message for line in self.log if severity in (None, line.severity)]


def macro_strings(macros: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """Published parameters as FME passes them: every value a string (None: ``""``)."""
    return {str(k): "" if v is None else str(v) for k, v in (macros or {}).items()}


_CURRENT: "contextvars.ContextVar[Optional[FakeFME]]" = contextvars.ContextVar(
    "fair_fake_fme", default=None)
_lock = threading.Lock()
_depth = 0
_saved: Dict[str, Any] = {}
_default: List[FakeFME] = []   # the outermost installation's, for threads with no run of their own


def current_fme() -> FakeFME:
    """The :class:`FakeFME` the fake modules serve in this thread of work."""
    here = _CURRENT.get()
    if here is not None:
        return here
    with _lock:
        return _default[-1] if _default else FakeFME()


class FakeLogFile:
    """``fmeobjects.FMELogFile``: each message goes to the current :class:`FakeFME`'s log."""

    def logMessageString(self, message: str, severity: int = FME_INFORM) -> None:
        current_fme().log.append(LogLine(SEVERITIES.get(severity, str(severity)), str(message)))

    def logFeature(self, feature: Any, severity: int = FME_INFORM) -> None:
        self.logMessageString(repr(feature), severity)


class FakeFMESession:
    """``fmeobjects.FMESession`` as Safe's ``fmetools.http`` reads it: FME's network settings
    (the current :class:`FakeFME`'s ``session_properties``) and FME's text decoding."""

    def getProperties(self, propertyCategory: str, properties: Any = None) -> List[str]:
        return list(current_fme().session_properties.get(propertyCategory, []))

    def decodeFromFMEParsableText(self, parsableText: str) -> str:
        return decode_fme(str(parsableText))


class FakeBaseTransformer:
    """``fme.BaseTransformer`` (FME 2024.2+): the PythonCaller class interface, doing nothing."""

    def input(self, feature: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def process_group(self) -> None:
        pass

    def has_support_for(self, support_type: int) -> bool:
        return False


class _FakeFmeModule(types.ModuleType):
    """The ``fme`` module: ``macroValues`` is the current run's published parameters."""

    BaseTransformer = FakeBaseTransformer

    @property
    def macroValues(self) -> Dict[str, str]:
        return current_fme().macros


def _fake_fmeobjects() -> types.ModuleType:
    module = types.ModuleType("fmeobjects", "A stand-in for FME's fmeobjects module "
                                            "(fme_ai_resilience.testing).")
    module.FMEFeature = FakeFeature               # type: ignore[attr-defined]
    module.FMELogFile = FakeLogFile               # type: ignore[attr-defined]
    module.FMEException = FMEException            # type: ignore[attr-defined]
    module.FMESession = FakeFMESession            # type: ignore[attr-defined]
    module.FME_ASSEMBLY_VERSION = FME_ASSEMBLY_VERSION  # type: ignore[attr-defined]
    for name, value in list(globals().items()):
        if name.startswith(("FME_ATTR_", "FME_SUPPORT_")) or name in (
                "FME_INFORM", "FME_WARN", "FME_ERROR", "FME_FATAL"):
            setattr(module, name, value)
    return module


@contextlib.contextmanager
def installed_fme(fake: Optional[FakeFME] = None) -> Iterator[FakeFME]:
    """``fme`` and ``fmeobjects`` in ``sys.modules`` for the block, serving ``fake`` (a new
    :class:`FakeFME` by default); whatever was there before comes back afterwards."""
    global _depth
    fake = fake if fake is not None else FakeFME()
    with _lock:
        if _depth == 0:
            for name in ("fme", "fmeobjects"):
                _saved[name] = sys.modules.get(name)
            sys.modules["fme"] = _FakeFmeModule("fme", "A stand-in for FME's fme module.")
            sys.modules["fmeobjects"] = _fake_fmeobjects()
        _depth += 1
        _default.append(fake)
    token = _CURRENT.set(fake)
    try:
        yield fake
    finally:
        _CURRENT.reset(token)
        with _lock:
            del _default[max(i for i, f in enumerate(_default) if f is fake)]
            _depth -= 1
            if _depth == 0:
                for name, module in _saved.items():
                    if module is None:
                        sys.modules.pop(name, None)
                    else:
                        sys.modules[name] = module
                _saved.clear()
