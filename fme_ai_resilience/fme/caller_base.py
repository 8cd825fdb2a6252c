"""What the PythonCaller classes of :mod:`fme_ai_resilience.fme` share: the published
parameters, the ledger, FME's log, and the output features with their ``fair_*`` attributes.

:class:`CallerBase` has the PythonCaller class interface (docs/fme-flow.md): a
no-argument constructor, ``input(feature)``, ``close()``, ``process_group()``, and
``has_support_for()`` declining Bulk Mode; FME injects ``self.pyoutput``. At the first feature
it reads the settings from ``fme.macroValues`` (``FAIR_*`` published parameters, then the
ledger's ``resilience_config`` table), opens the ledger named by ``FAIR_DB`` (which must hold
the library's schema) and builds what the caller runs; ``close()`` closes the ledger. A
configuration that cannot work leaves through ``<Rejected>`` with ``fme_rejection_code``
``CONFIGURATION`` and a message naming the published parameter; a ledger out of reach is
logged and tried again at the next feature.

Output features are new (never the input's attributes: a webhook body holds the submitter's
portal token) and carry the attributes of their kind (:data:`ATTRIBUTES`), each set or a real
null (``setAttributeNullWithType``; left missing where a build lacks it); booleans are
``"true"``/``"false"``, integers beyond Int32 strings, times FME date-times in UTC.
``<Rejected>`` is ``pyoutput(feature, output_tag="<Rejected>")``; an FME without output tags
(before 2024.0) raises TypeError for the keyword, and the feature then leaves through the
normal port with its ``fme_rejection_code``.

Log lines go to ``fmeobjects.FMELogFile`` (made per line) as INFORM, WARN or ERROR, and the
library's own warnings reach it too while a caller works; without ``fmeobjects``, to Python
``logging``. Every line and text attribute is redacted, with the secret parameters' values.
``fme`` and ``fmeobjects`` are imported when used, never at import time.
"""
from __future__ import annotations

import contextlib
import contextvars
import datetime
import enum
import importlib
import logging
import math
import platform
import threading
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple
from urllib.parse import urlsplit

import requests
import urllib3

from .. import __version__
from ..core.clock import Clock, SystemClock
from ..core.errors import ConfigurationError, StoreError
from .decrypt import decrypted_values, is_encrypted
from ..core.fme.deployment import is_reference
from ..core.fme.parameters import (COMPENSATOR, DB_PARAMETER, INTAKE, PARAMETERS, PROCESSOR,
                                   parameter_name)
from ..core.text.redact import REDACTED, redact_text
from ..services.http.session_choice import session_choice
from ..core.config.settings import SECRET_SETTINGS, Settings
from ..store import SqlStore, display_url, open_store

__all__ = ["CallerBase", "ATTRIBUTES", "CONCLUSION_ATTRIBUTES", "WORKSPACE_ATTRIBUTES",
           "REJECTED_TAG", "CONFIGURATION_CODE", "injected", "fme_time", "is_null"]

log = logging.getLogger("fme_ai_resilience.fme")

#: The output tag of the ``<Rejected>`` port (FME 2024.0 and later).
REJECTED_TAG = "<Rejected>"
#: ``fme_rejection_code`` of a configuration that cannot work.
CONFIGURATION_CODE = "CONFIGURATION"

#: The ``fair_*`` attributes of each kind of output feature (``fair_kind``), in order.
ATTRIBUTES: Mapping[str, Tuple[str, ...]] = MappingProxyType({
    "registration": ("fair_kind", "fair_key", "fair_status", "fair_registration", "fair_outcome",
                     "fair_answer", "fair_http_status", "fair_retry_after_s", "fair_trace_id",
                     "fair_feature_globalid", "fair_attachment_globalid", "fair_asset_type",
                     "fair_event_type", "fair_delivery_id", "fair_reason"),
    "dead_letter": ("fair_kind", "fair_key", "fair_status", "fair_failure_class", "fair_answer",
                    "fair_http_status", "fair_trace_id", "fair_delivery_id", "fair_reason"),
    "task": ("fair_kind", "fair_key", "fair_status", "fair_outcome", "fair_condition",
             "fair_confidence", "fair_error_class", "fair_failure_class", "fair_retry_at",
             "fair_retry_after_s", "fair_trace_id", "fair_reused", "fair_reason"),
    "report": ("fair_kind", "fair_status", "fair_reaped", "fair_buried", "fair_requeued",
               "fair_notified", "fair_breakers", "fair_ladder", "fair_pruned_calls",
               "fair_pruned_anomalies", "fair_reconciled", "fair_missing", "fair_backfilled",
               "fair_alert_level", "fair_alerts", "fair_backlog", "fair_watermark",
               "fair_spend", "fair_currency", "fair_error_class", "fair_reason"),
    "notification": ("fair_kind", "fair_notification_id", "fair_notification_kind", "fair_key",
                     "fair_subject", "fair_body", "fair_created_at"),
    "configuration": ("fair_kind", "fair_parameter", "fair_reason"),
})
#: What a task feature also carries with ``writeback.sink=collect``, besides the fields the
#: ``writeback.*_field`` settings name (``ai_condition`` ...), for the workspace's writers.
CONCLUSION_ATTRIBUTES = ("fair_feature_globalid", "fair_attachment_globalid", "fair_layer_url",
                         "fair_asset_type", "fair_model_version", "fair_labels",
                         "fair_assessed_at")
#: The fields a collected conclusion fills under the library's default ``writeback.*_field``
#: names (with ``writeback.table_url`` also the related table's two), exposed on the
#: processor's ports so a writer after it can map them.
WRITEBACK_FIELDS = ("ai_condition", "ai_confidence", "ai_status", "ai_model", "ai_trace_id",
                    "ai_assessed_at", "parentglobalid", "ai_photo_globalid")



def _union(*groups: Sequence[str]) -> Tuple[str, ...]:
    return tuple(dict.fromkeys(a for group in groups for a in group))


#: The attributes each workspace's caller sets on some feature it outputs, in a stable order:
#: the templates expose all of them on both PythonCaller ports.
WORKSPACE_ATTRIBUTES: Mapping[str, Tuple[str, ...]] = MappingProxyType({
    INTAKE: _union(ATTRIBUTES["registration"], ATTRIBUTES["dead_letter"],
                   ATTRIBUTES["configuration"]),
    PROCESSOR: _union(ATTRIBUTES["task"], CONCLUSION_ATTRIBUTES, WRITEBACK_FIELDS,
                      ATTRIBUTES["configuration"]),
    COMPENSATOR: _union(ATTRIBUTES["report"], ATTRIBUTES["notification"],
                        ATTRIBUTES["configuration"]),
})

_INT32 = 2 ** 31
#: Published parameters whose whole value is a secret (FAIR_DB is shown without credentials).
_SECRET_PARAMETERS = frozenset({p.name for p in PARAMETERS if p.secret}
                               | {parameter_name(s) for s in SECRET_SETTINGS}) - {DB_PARAMETER}
_SEVERITY = {"INFORM": ("FME_INFORM", logging.INFO), "WARN": ("FME_WARN", logging.WARNING),
             "ERROR": ("FME_ERROR", logging.ERROR)}
_INJECTED: "contextvars.ContextVar[Mapping[str, Any]]" = contextvars.ContextVar(
    "fair_fme_injected", default=MappingProxyType({}))


@contextlib.contextmanager
def injected(*, clock: Optional[Clock] = None,
             session: Optional[requests.Session] = None) -> Iterator[None]:
    """Callers made inside the block use ``clock`` and ``session`` (the HTTP session of the
    Vision AI and ArcGIS calls) instead of the system's; ``run_caller`` of
    :mod:`fme_ai_resilience.testing` uses it. Outside it FME's no-argument construction gets
    the system clock."""
    given = {k: v for k, v in (("clock", clock), ("session", session)) if v is not None}
    token = _INJECTED.set(MappingProxyType(given))
    try:
        yield
    finally:
        _INJECTED.reset(token)


def _module(name: str) -> Any:
    """FME's ``fme`` or ``fmeobjects`` module, or None outside FME (and without stand-ins)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _macro_values() -> Dict[str, str]:
    fme = _module("fme")
    values = getattr(fme, "macroValues", None) if fme is not None else None
    return {str(k): "" if v is None else str(v) for k, v in (values or {}).items()}


def _secret_values(macros: Mapping[str, str]) -> Tuple[str, ...]:
    found = [v.strip() for k, v in macros.items() if k in _SECRET_PARAMETERS and v.strip()]
    try:
        password = urlsplit(macros.get(DB_PARAMETER, "").strip()).password
    except ValueError:
        password = None
    return tuple(found + ([password] if password else []))


def _refuse_unresolved(macros: Mapping[str, str]) -> None:
    """A ``FAIR_*`` value that is still a reference, ``$(fair_db)``: the deployment parameter
    it names was not resolved by FME Flow (docs/fme-flow.md, Deploying)."""
    for name, value in macros.items():
        if name.startswith("FAIR_") and is_reference(value):
            raise ConfigurationError(name, value.strip(), (
                f"is a reference FME Flow did not resolve: create the deployment parameter "
                f"{value.strip()[2:-1]} (fme-ai-resilience flow deploy does), or give the "
                f"value itself"))


def _parameter_of(field: str) -> str:
    """The published parameter a configuration error is about."""
    if field.upper().startswith("FAIR_"):
        return field
    if field in ("store URL", "--db"):
        return DB_PARAMETER
    setting = field.split("[", 1)[0]
    return parameter_name(setting) if "." in setting else field


def fme_time(epoch: Optional[float]) -> Optional[str]:
    """Epoch seconds as an FME date-time in UTC, ``YYYYMMDDHHMMSS+00:00``."""
    if epoch is None:
        return None
    moment = datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc)
    return moment.strftime("%Y%m%d%H%M%S+00:00")


class _Forwarder(logging.Handler):
    """Passes the library's warnings and errors to FME's log while any caller works."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.users = 0
        self.secrets: Dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        fmeobjects = _module("fmeobjects")
        if fmeobjects is None or record.name == log.name:
            return
        with _FORWARDING:
            secrets = list(self.secrets)
        try:
            text = redact_text(f"{record.name}: {record.getMessage()}", secrets)
            severity = "ERROR" if record.levelno >= logging.ERROR else "WARN"
            fmeobjects.FMELogFile().logMessageString(
                text, getattr(fmeobjects, _SEVERITY[severity][0]))
        except Exception:  # noqa: BLE001 - a log line must never break a translation
            self.handleError(record)


_FORWARDER = _Forwarder()
_FORWARDING = threading.Lock()


@contextlib.contextmanager
def _forwarding(secrets: Sequence[str]) -> Iterator[None]:
    """The library's logger feeds FME's log for the block (one handler, counted uses)."""
    with _FORWARDING:
        if _FORWARDER.users == 0:
            logging.getLogger("fme_ai_resilience").addHandler(_FORWARDER)
        _FORWARDER.users += 1
        for secret in secrets:
            _FORWARDER.secrets[secret] = _FORWARDER.secrets.get(secret, 0) + 1
    try:
        yield
    finally:
        with _FORWARDING:
            for secret in secrets:
                _FORWARDER.secrets[secret] -= 1
                if not _FORWARDER.secrets[secret]:
                    del _FORWARDER.secrets[secret]
            _FORWARDER.users -= 1
            if _FORWARDER.users == 0:
                logging.getLogger("fme_ai_resilience").removeHandler(_FORWARDER)


class CallerBase:
    """What the three callers share: settings, the ledger, logs and output features."""

    workspace = ""
    #: Whether the caller calls out over HTTP (its first line names the session).
    uses_http = False
    #: Whether the PythonCaller has a ``<Rejected>`` port: None asks FME (an output tag,
    #: else the one port); False, for a version-4 PythonCaller (the FME 2023 and 2024
    #: templates), sends rejected features through Output with fme_rejection_code set.
    rejected_port: Optional[bool] = None

    def __init__(self) -> None:
        given = _INJECTED.get()
        self.clock: Clock = given.get("clock") or SystemClock()
        self._session: Optional[requests.Session] = given.get("session")
        self._started = self.clock.now()
        self._store: Optional[SqlStore] = None
        self._settings: Optional[Settings] = None
        self._macros: Dict[str, str] = {}
        self._secrets: Tuple[str, ...] = ()
        self._plain: Dict[str, str] = {}      # decrypted parameter values, by cipher text
        self._tags: Optional[bool] = self.rejected_port   # pyoutput with output_tag? None: ask
        self._introduced = False

    def __repr__(self) -> str:
        ledger = "closed" if self._store is None else getattr(self._store, "dialect", "?")
        return f"{type(self).__name__}(workspace={self.workspace!r}, ledger={ledger})"

    # -- the PythonCaller interface ----------------------------------------------------------
    def input(self, feature: Any) -> None:
        """Handle one feature (see the class docstring)."""
        given = self._parameters(feature)
        refused: Optional[ConfigurationError] = None
        try:   # a password parameter may arrive encrypted (docs/fme-flow.md, Secrets)
            ours = {k: v for k, v in given.items() if k.startswith("FAIR_")}
            self._macros = {**given, **decrypted_values(ours, cache=self._plain)}
            _refuse_unresolved(self._macros)
        except ConfigurationError as exc:
            self._macros = {k: v for k, v in given.items() if not is_encrypted(v)}
            refused = exc
        self._secrets = _secret_values(self._macros)
        with _forwarding(self._secrets):
            try:
                if refused is not None:
                    raise refused
                self._open()
                if not self._introduced:
                    self._introduce()
                self._handle(feature)
            except ConfigurationError as exc:
                self._refuse(feature, exc)
            except StoreError as exc:
                self._ledger_down(feature, exc)

    def _parameters(self, feature: Any) -> Dict[str, str]:
        """The published parameters in force for ``feature``: ``fme.macroValues``."""
        return _macro_values()

    def close(self) -> None:
        """Close the ledger (also when no feature ever came)."""
        store, self._store, self._settings = self._store, None, None
        if store is not None:
            store.close()

    def process_group(self) -> None:
        """Nothing is held per group: every feature is handled as it arrives."""

    def has_support_for(self, support_type: Any) -> bool:
        """No Bulk Mode: output features are made one by one, never from a feature table."""
        return False

    # -- settings and the ledger -------------------------------------------------------------
    def _open(self) -> None:
        if self._settings is not None:
            return
        settings = Settings.from_mapping(self._macros, prefix="FAIR_")
        url = self._macros.get(DB_PARAMETER, "").strip()
        if not url:
            raise ConfigurationError(DB_PARAMETER, "", "the ledger URL is required "
                                     "(sqlite:////absolute/path.db or postgresql://...)")
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:" \
                and not Path(url[len("sqlite:///"):]).exists():
            raise ConfigurationError(DB_PARAMETER, display_url(url), "no ledger file there: "
                                     "create it with fme-ai-resilience db init --db URL")
        store = open_store(url, create=False)
        try:
            version, latest = store.schema_version(), SqlStore.latest_schema_version(
                store.dialect)
            if version < latest:
                raise ConfigurationError(DB_PARAMETER, display_url(url), (
                    f"the ledger's schema is at version {version}, the library needs {latest}:"
                    f" run fme-ai-resilience db {'init' if not version else 'upgrade'}"))
            try:
                settings = settings.with_values(store.get_config())
            except ConfigurationError as exc:
                raise ConfigurationError(exc.field, exc.value, f"{exc.reason} (a row of the "
                                         "ledger's resilience_config table)") from None
            self._configure(settings, store=store)
        except BaseException:
            store.close()
            raise
        self._store, self._settings = store, settings

    def _configure(self, settings: Settings, *, store: SqlStore) -> None:
        """Build what the caller runs (raises ConfigurationError for what cannot work)."""

    def _introduce(self) -> None:
        """The first feature's line: the library's version and place, the Python, requests
        and urllib3 versions and, for a caller that calls out, the HTTP session in use; one
        WARN when this is FME and FME's own session (its proxies, certificates) could not be
        made (docs/fme-flow.md, FME's network settings)."""
        self._introduced = True
        where = Path(__file__).resolve().parent.parent
        line = (f"fme-ai-resilience {__version__} ({where}), Python "
                f"{platform.python_version()}, requests {requests.__version__}, urllib3 "
                f"{urllib3.__version__}")
        choice = None
        if self.uses_http and self._session is None:
            choice = session_choice()
            line += f"; {choice.describe()}"
        elif self.uses_http:
            line += "; HTTP through the session handed in"
        self._log("INFORM", line)
        if choice is not None and choice.problem:
            self._log("WARN", f"FME's network session cannot be made: {choice.problem}. "
                              "Calls use the environment's proxy variables and CA bundle, "
                              "not FME's proxy settings, PAC files or certificate store")

    def _ledger(self) -> SqlStore:
        if self._store is None:   # only while handling a feature, after _open
            raise StoreError("the ledger is not open")
        return self._store

    def _handle(self, feature: Any) -> None:
        """Do the caller's work for one feature (each caller defines it)."""

    # -- outcomes that are the same everywhere -----------------------------------------------
    def _refuse(self, feature: Any, exc: ConfigurationError) -> None:
        parameter = _parameter_of(str(exc.field))
        shown = REDACTED if parameter in _SECRET_PARAMETERS and exc.value else exc.value
        message = redact_text(f"{parameter}={shown!r}: {exc.reason}", self._secrets)
        out = self._make("configuration", feature, fair_parameter=parameter, fair_reason=message)
        self._log("ERROR", f"configuration: {message}")
        self._reject(out, CONFIGURATION_CODE, message)

    def _ledger_down(self, feature: Any, exc: StoreError) -> None:
        self._log("ERROR", f"ledger {self._shown_db()} unavailable: {exc}; the next run "
                           "tries again")

    def _shown_db(self) -> str:
        return display_url(self._macros.get(DB_PARAMETER, "").strip() or "(none)")

    # -- output ------------------------------------------------------------------------------
    def _make(self, kind: str, template: Any, extra: Sequence[str] = (),
              **values: Any) -> Any:
        """A new feature of ``kind``: each of its attributes set, or null."""
        fmeobjects = _module("fmeobjects")
        feature = fmeobjects.FMEFeature() if fmeobjects is not None else type(template)()
        set_geometry = getattr(feature, "setGeometry", None)
        if set_geometry is not None:   # a null geometry, never an undefined one (fmetools)
            set_geometry(None)
        values["fair_kind"] = kind
        for name in (*ATTRIBUTES[kind], *extra):
            self._put(feature, name, values.get(name), fmeobjects)
        return feature

    def _put(self, feature: Any, name: str, value: Any, fmeobjects: Any) -> None:
        if isinstance(value, enum.Enum):
            value = value.value
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            make_null = getattr(feature, "setAttributeNullWithType", None)
            if make_null is not None:    # else left missing: "" would be a wrong value
                make_null(name, getattr(fmeobjects, "FME_ATTR_STRING", 0))
            return
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int) and not -_INT32 <= value < _INT32:
            value = str(value)          # FME's Int32 would overflow
        elif isinstance(value, str):
            value = redact_text(value, self._secrets)
        feature.setAttribute(name, value)

    def _reject(self, feature: Any, code: str, message: str) -> None:
        feature.setAttribute("fme_rejection_code", code)
        feature.setAttribute("fme_rejection_message", redact_text(message, self._secrets))
        if self._tags is not False:
            try:
                self.pyoutput(feature, output_tag=REJECTED_TAG)  # type: ignore[attr-defined]
                self._tags = True
                return
            except TypeError:   # FME before 2024.0: pyoutput takes no output tag
                self._tags = False
                self._log("WARN", "this FME has no <Rejected> port for Python: rejected "
                                  "features leave through Output with fme_rejection_code set")
        self.pyoutput(feature)  # type: ignore[attr-defined]

    def _log(self, severity: str, message: str) -> None:
        text = redact_text(f"fme-ai-resilience {self.workspace}: {message}", self._secrets)
        fmeobjects = _module("fmeobjects")
        constant, level = _SEVERITY[severity]
        if fmeobjects is None:
            log.log(level, "%s", text)
        else:
            fmeobjects.FMELogFile().logMessageString(text, getattr(fmeobjects, constant))



def is_null(feature: Any, name: str) -> bool:
    """Whether ``name`` is a null attribute (False on old FME builds without the check)."""
    check = getattr(feature, "isAttributeNull", None)
    return bool(check(name)) if check is not None else False
