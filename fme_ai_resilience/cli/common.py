"""What every command shares: the ledger named by ``--db``, the settings, one exit-code policy.

Exit codes, the same for every command:

* :data:`EXIT_OK` (0): done;
* :data:`EXIT_FAILED` (1): a check failed, a configuration does not fit, or the ledger could
  not do what was asked (unreachable, locked, no schema, no such SQLite file or directory);
* :data:`EXIT_USAGE` (2): a usage or configuration error (a missing or malformed ``--db``, a bad
  setting, an unknown option, an option value out of range or not finite).

Commands are plain functions ``run(args) -> int`` wrapped in :func:`command`, which checks
``--db`` first and turns the library's exceptions into one line on stderr and the exit code
above. Number options take :func:`number` or :func:`whole` as their argparse ``type``, so a bad
value is refused at parse time, naming the option.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

from ..core.checks import ascii_name, count, finite, read_count, read_number
from ..core.errors import ConfigurationError, ResilienceError, StoreError, StoreUnavailable
from ..core.config.settings import Settings
from ..store import SqlStore, display_url, open_store

__all__ = ["DAY_S", "service_name", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "DB_ENV", "DB_FORMS", "OptionError",
           "add_db_option", "announce", "check_db_url", "command", "configured_secrets",
           "exit_codes", "json_text", "ledger",
           "ledger_error", "number", "open_from_args", "parse_values", "port", "setting_default",
           "settings_for", "settings_from_args", "whole"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

DB_ENV = "FAIR_DB_URL"
#: The ledger URLs ``--db`` takes, as every message about a bad one names them.
DB_FORMS = ("sqlite:///relative/path.db, sqlite:////absolute/path.db or "
            "postgresql://user@host:port/db")
_SQLITE = "sqlite:///"
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg2://", "postgresql+pg8000://")


class OptionError(ConfigurationError, argparse.ArgumentTypeError):
    """An option value that cannot be used: argparse reports it with the option (exit 2)."""

    def __str__(self) -> str:
        return f"{self.reason}, got {self.value!r}"


def _option_type(read: Callable[[str, str], Any], check: Callable[..., Any],
                 **bounds: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = read("value", text)
            return check("value", value, **bounds) if bounds else value
        except ConfigurationError as exc:
            raise OptionError("value", text, exc.reason) from None
    return parse


#: A day in seconds: the longest wait or interval an option takes.
DAY_S = 86_400.0


def number(*, minimum: Optional[float] = None, above: Optional[float] = None,
           maximum: Optional[float] = None) -> Callable[[str], float]:
    """An argparse ``type``: a finite number in ASCII digits within the bounds given.

    Without bounds only the form is checked: an option that sets a setting leaves the range
    to the setting, whose message names it (``intake.mean_processing_s=0: must be > 0``).
    """
    bounds = {k: v for k, v in (("minimum", minimum), ("above", above), ("maximum", maximum))
              if v is not None}
    return _option_type(read_number, finite, **bounds)


def whole(*, minimum: Optional[int] = None, maximum: Optional[int] = None
          ) -> Callable[[str], int]:
    """An argparse ``type``: a whole number in ASCII digits within the bounds given (without
    bounds, as :func:`number`, the setting it feeds checks the range)."""
    bounds = {k: v for k, v in (("minimum", minimum), ("maximum", maximum)) if v is not None}
    return _option_type(read_count, count, **bounds)


def service_name(text: str) -> str:
    """An argparse ``type``: a service name in ASCII, at most 128 characters."""
    try:
        return ascii_name("value", text)
    except ConfigurationError as exc:
        raise OptionError("value", exc.value, exc.reason) from None


#: An argparse ``type`` for a TCP port (0 lets the system pick one).
port = whole(minimum=0, maximum=65535)


def exit_codes(failed: str = "the ledger could not do it (unreachable, no schema, no such "
                             "SQLite file)",
               usage: str = "a missing or malformed --db, a bad option or setting") -> str:
    """The epilog every command's ``--help`` ends with: its exit codes."""
    return f"Exit codes: 0 done; 1 {failed}; 2 a usage or configuration error ({usage})."


def setting_default(name: str) -> str:
    """How an option that sets ``name`` shows its default: ``(default: intake.engines, 8)``."""
    value = Settings().as_flat_dict()[name]
    return f"(default: {name}, {value:g})" if isinstance(value, float) else \
        f"(default: {name}, {value})"


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default ``$FAIR_DB_URL``) to a sub-command."""
    parser.add_argument("--db", metavar="URL", default=os.environ.get(DB_ENV),
                        help=f"the ledger: {DB_FORMS} (default: ${DB_ENV})")


def json_text(value: Any, indent: Optional[int] = 2) -> str:
    """``value`` as strict JSON for a command to print: a float that is not finite (no setting
    should let one arise) becomes null, never ``Infinity`` or ``NaN``, which JSON lacks."""
    def finite_only(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, Mapping):
            return {k: finite_only(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite_only(x) for x in v]
        return v
    return json.dumps(finite_only(value), indent=indent, allow_nan=False, default=str)


def check_db_url(url: Optional[str]) -> str:
    """``url`` when it has one of the forms of :data:`DB_FORMS`; raises
    :class:`ConfigurationError` naming ``--db`` and the forms otherwise."""
    if not url or not url.strip():
        raise ConfigurationError("--db", "", f"no ledger given: pass --db URL or set {DB_ENV} "
                                             f"(URL: {DB_FORMS})")
    url = url.strip()
    if url.startswith(_SQLITE) and len(url) > len(_SQLITE):
        return url
    if url.startswith(_POSTGRES):
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a port that is not a number raises ValueError
        except ValueError:
            parts = None
        if parts is not None and (parts.hostname or parts.path.strip("/") or parts.query):
            return url
        problem = "names no server and no database"
    else:
        problem = "is not a ledger URL"
    raise ConfigurationError("--db", display_url(url), f"{problem}: expected {DB_FORMS}")


def _missing_sqlite(url: str, *, file_too: bool) -> Optional[str]:
    """What is missing for the SQLite ledger ``url``: its directory (or, with ``file_too``, its
    file), as the one line the command prints; None when nothing is missing."""
    if not url.startswith(_SQLITE) or url == f"{_SQLITE}:memory:":
        return None
    path = Path(url[len(_SQLITE):])
    if not path.parent.is_dir():
        return (f"no such directory {path.parent.absolute()}: sqlite:///relative/path.db is "
                f"relative to the working directory, sqlite:////absolute/path.db is absolute")
    if file_too and not path.exists():
        return (f"no ledger file at {path.absolute()}: create it with "
                f"fme-ai-resilience db init --db {display_url(url)}")
    return None


def parse_values(items: Sequence[str]) -> Dict[str, str]:
    """``--set NAME=VALUE`` items as a mapping; raises :class:`ConfigurationError` for an item
    without ``=`` (the value is never echoed: it may be a key)."""
    values: Dict[str, str] = {}
    for item in items:
        setting, sep, value = item.partition("=")
        if not sep:
            raise ConfigurationError("--set", setting.strip(), "expected NAME=VALUE")
        values[setting.strip()] = value
    return values


def settings_from_args(items: Sequence[str], explicit: Mapping[str, Any]) -> Settings:
    """Settings from ``FAIR_*`` variables, then ``--set NAME=VALUE`` items, then options.

    ``explicit`` maps setting names to option values; None means "not given".
    Raises :class:`ConfigurationError` for an item without ``=`` or a bad value.
    """
    values: Dict[str, Any] = parse_values(items)
    values.update({k: v for k, v in explicit.items() if v is not None})
    return Settings.from_env(os.environ).with_values(values)


def settings_for(*, store: SqlStore) -> Settings:
    """Settings from ``FAIR_*`` variables, then the run-time ``resilience_config`` table."""
    return Settings.from_env(os.environ).with_values(store.get_config())


#: Environment variables holding a secret the product may meet although no setting names it
#: (the AWS credential of a Rekognition signer).
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def configured_secrets(settings: Settings, db: Optional[str] = None) -> Tuple[str, ...]:
    """Every secret this process was configured with: the secret settings' values, the
    password of the ledger URL ``db`` (as written and decoded) and the :data:`SECRET_ENV`
    variables; scrubbed from whatever a command stores or prints."""
    found = list(settings.secret_values())
    try:
        password = urlsplit(db).password if db else None
    except ValueError:
        password = None
    if password:
        found += [password, unquote(password)]
    found += [os.environ.get(name, "") for name in SECRET_ENV]
    return tuple(dict.fromkeys(v for v in found if v and v.strip()))


def open_from_args(args: argparse.Namespace, *, create: bool = False) -> SqlStore:
    """The store named by ``--db``, limited by the ``database.*`` settings of the ``FAIR_*``
    variables, named on stderr (:func:`announce`) once it answers. Only ``create=True``
    (``db init``) may bring a
    new SQLite file, and its missing directories, into existence. Raises
    :class:`ConfigurationError` when ``--db`` is missing or malformed,
    :class:`StoreUnavailable` when a SQLite ledger's file or directory is not there."""
    url = check_db_url(args.db)
    # db init/upgrade (create=True) also makes a new SQLite file's directory, and migrates
    # explicitly, reporting what it applied: the store does not do it on opening then.
    missing = None if create else _missing_sqlite(url, file_too=True)
    if missing:
        raise StoreUnavailable(missing)
    store = open_store(url, create=create, create_parents=create, auto_schema=not create,
                       settings=Settings.from_env(os.environ).database)
    try:
        # One read first: a ledger that cannot be reached is one error line naming it; a
        # reachable one is named on its own line before the command works on it.
        store.schema_version()
    except BaseException:
        store.close()
        raise
    announce(store=store, json_logs=getattr(args, "log_format", None) == "json")
    return store


def announce(*, store: SqlStore, json_logs: bool = False) -> None:
    """Say on stderr which ledger the command works on (never with its password): a line of
    its own, or a log record where the command logs JSON lines (stderr stays JSON)."""
    if json_logs:
        logging.getLogger("fme_ai_resilience.cli").info("ledger: %s", store.describe())
    else:
        print(f"ledger: {store.describe()}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def ledger(args: argparse.Namespace, *, create: bool = False) -> Iterator[
        Tuple[SqlStore, Settings]]:
    """The store named by ``--db`` and the settings in force, closed afterwards."""
    store = open_from_args(args, create=create)
    try:
        yield store, settings_for(store=store)
    finally:
        store.close()


def ledger_error(args: argparse.Namespace, exc: StoreError) -> str:
    """The one line that says why the ledger named by ``--db`` could not do the work: the
    missing SQLite directory when that is why, the store's own reason otherwise."""
    db = getattr(args, "db", None)
    missing = _missing_sqlite(db, file_too=False) if db else None
    return f"ledger {display_url(db) if db else '(none)'}: {missing or exc}"


def command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` with the exit-code policy: a ledger that cannot do the work exits 1, a usage or
    configuration error 2; each with one line on stderr and no traceback. ``--db`` is checked
    first (a command whose parser sets ``db_optional`` may go without one)."""
    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            if hasattr(args, "db") and (args.db or not getattr(args, "db_optional", False)):
                args.db = check_db_url(args.db)
            return run(args)
        except StoreError as exc:
            print(f"error: {ledger_error(args, exc)}", file=sys.stderr)
            return EXIT_FAILED
        except (ConfigurationError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ResilienceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    return wrapper
