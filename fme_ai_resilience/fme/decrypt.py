"""Parameter values FME hands over still encrypted, made plain the way FME's own Python does.

A password parameter typed into Workbench is saved encrypted: a 2025 workspace holds
``DEFAULT_MACRO NAME fme_decrypt(MDow...)``, and depending on the release and the route (a
published parameter's default, a transformer's ``___XF_`` attribute) the value may reach
Python in that form. Safe's own Python decrypts such a value by evaluating it inside an FME
function, ``FMEFeature().performFunction("@Concatenate(fme_decrypt(...))")``; so does
:func:`decrypted`. Outside FME, or when FME cannot decrypt it, the value is refused with a
:class:`~fme_ai_resilience.core.errors.ConfigurationError` naming the parameter, never passed on
encrypted (a ledger URL or an API key that reads ``fme_decrypt(...)`` would only fail later,
as a misleading rejection or an AUTH dead letter). docs/fme-flow.md, Secrets.
"""
from __future__ import annotations

import importlib
import re
from typing import Any, Dict, Mapping, MutableMapping, Optional

from ..core.errors import ConfigurationError
from ..core.text.redact import REDACTED

__all__ = ["ENCRYPTED_PREFIX", "is_encrypted", "decrypted", "decrypted_values"]

#: How an encrypted value starts (``fme_decrypt(<cipher text>)``).
ENCRYPTED_PREFIX = "fme_decrypt("
#: The whole of an encrypted value: one base64 cipher text, nothing else. Only this shape is
#: handed to FME's function evaluator; a value that merely starts and ends like it (a webhook
#: body a sender wrote, with ``@Tcl2(...)`` inside) is plain text, never evaluated.
_ENCRYPTED = re.compile(r"fme_decrypt\([A-Za-z0-9+/]+=*\)")


def is_encrypted(value: Any) -> bool:
    """Whether ``value`` is FME's encrypted form, ``fme_decrypt(<base64>)``, and only that."""
    text = value.strip() if isinstance(value, str) else ""
    return _ENCRYPTED.fullmatch(text) is not None


def _fmeobjects() -> Any:
    try:
        return importlib.import_module("fmeobjects")
    except ImportError:
        return None


def decrypted(name: str, value: str, *, fmeobjects: Optional[Any] = None) -> str:
    """``value`` in plain text: as given unless it is ``fme_decrypt(...)``, which FME's
    ``@Concatenate`` decrypts. ``fmeobjects`` defaults to FME's module.

    Raises ConfigurationError naming ``name`` (the value shown as ``[REDACTED]``) when no
    FME is here to decrypt it or FME could not.
    """
    if not is_encrypted(value):
        return value
    module = fmeobjects if fmeobjects is not None else _fmeobjects()
    make = getattr(module, "FMEFeature", None)
    if make is None:
        raise ConfigurationError(name, REDACTED, "arrived encrypted (fme_decrypt) and no FME "
                                 "is here to decrypt it: give the value in plain text")
    try:
        plain = make().performFunction(f"@Concatenate({value.strip()})")
    except Exception as exc:  # noqa: BLE001 - FMEException and whatever FME raises
        raise ConfigurationError(name, REDACTED, f"arrived encrypted and FME could not "
                                 f"decrypt it ({type(exc).__name__}): type it again in "
                                 f"Workbench or FME Flow") from None
    if isinstance(plain, bytes):
        plain = plain.decode("utf-8", "replace")
    if not isinstance(plain, str) or is_encrypted(plain):
        raise ConfigurationError(name, REDACTED, "arrived encrypted and FME gave it back "
                                 "undecrypted: type it again in Workbench or FME Flow")
    return plain


def decrypted_values(values: Mapping[str, str], *,
                     cache: Optional[MutableMapping[str, str]] = None,
                     fmeobjects: Optional[Any] = None) -> Dict[str, str]:
    """Every value of ``values`` made plain (see :func:`decrypted`); ``cache`` keeps what was
    decrypted by its encrypted text, so a value is decrypted once per caller, not per
    feature. Raises ConfigurationError for the first value that cannot be decrypted."""
    out: Dict[str, str] = {}
    for name, value in values.items():
        if not is_encrypted(value):
            out[name] = value
        elif cache is not None and value in cache:
            out[name] = cache[value]
        else:
            out[name] = decrypted(name, value, fmeobjects=fmeobjects)
            if cache is not None:
                cache[value] = out[name]
    return out
