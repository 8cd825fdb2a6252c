"""How a long-running command logs: plain text, or one JSON object per line with the
``trace_id`` of the task being worked on (``--log-format json``, or ``$FAIR_LOG_FORMAT``),
every line without the secrets the command is configured with; and how every other command
shows the library's warnings (:func:`show_warnings`)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Sequence

from ..core.config.settings import Settings
from ..core.errors import ConfigurationError
from ..core.text.redact import scrub_secrets
from ..services.observe.logs import JsonLogFormatter
from .common import configured_secrets

__all__ = ["add_log_option", "setup_logging", "show_warnings", "LOG_ENV", "FORMATS"]

LOG_ENV = "FAIR_LOG_FORMAT"
FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def add_log_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--log-format text|json`` (default ``$FAIR_LOG_FORMAT``, else text)."""
    parser.add_argument("--log-format", choices=FORMATS,
                        default=os.environ.get(LOG_ENV, "").strip().lower() or "text",
                        help=f"text, or JSON lines with the trace id (default: ${LOG_ENV}, "
                             "else default: text)")


def setup_logging(args: argparse.Namespace) -> None:
    """Log INFO and above to stderr in the chosen format, unless logging is already set up
    (an embedding application's handlers are left alone)."""
    chosen = getattr(args, "log_format", "text")
    if chosen not in FORMATS:
        raise ConfigurationError(LOG_ENV, chosen, f"must be one of {list(FORMATS)}")
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Scrubbed(
        JsonLogFormatter() if chosen == "json" else logging.Formatter(_TEXT), _secrets(args)))
    root.addHandler(handler)
    root.setLevel(logging.INFO)


class _Scrubbed(logging.Formatter):
    """Lines of ``inner`` without any of ``secrets``, in any encoding (the last line of
    defence: each component already scrubs the secrets it knows)."""

    def __init__(self, inner: logging.Formatter, secrets: Sequence[str]) -> None:
        super().__init__()
        self.inner, self.secrets = inner, tuple(secrets)

    def format(self, record: logging.LogRecord) -> str:
        return scrub_secrets(self.inner.format(record), self.secrets)


def _secrets(args: argparse.Namespace) -> Sequence[str]:
    """The secrets the command is configured with (those of its ``FAIR_*`` settings, its
    ledger URL's password, the AWS credential, and the variables its ``--*-env`` options
    name: serve's shared and signing secrets, monitor token and FME Flow token); without the
    settings when they do not load (the command itself says why)."""
    try:
        settings = Settings.from_env(os.environ)
    except ConfigurationError:
        settings = Settings()
    named = [os.environ.get(value, "") for option, value in sorted(vars(args).items())
             if option.endswith("_env") and isinstance(value, str)]
    return configured_secrets(settings, getattr(args, "db", None)) + tuple(
        v for v in named if v.strip())


class _Warnings(logging.Handler):
    """The library's warnings, message only, on whatever ``sys.stderr`` is when they come,
    while nothing else handles logging (Python's own last resort, which the library's
    NullHandler turns off for the library's records)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers:   # the application (or setup_logging) has its own
            return
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - a warning must never break a command
            self.handleError(record)


_WARNINGS = _Warnings()


def show_warnings() -> None:
    """Let the command line show the library's warnings on stderr (once per process)."""
    library = logging.getLogger("fme_ai_resilience")
    if _WARNINGS not in library.handlers:
        library.addHandler(_WARNINGS)
