"""``fme-ai-resilience serve``: run the intake gateway on a production-grade HTTP server.

The server is waitress (:mod:`.httpserver`): many connections at once, a listen backlog of
2048, an idle and a read deadline per connection, and on SIGTERM or Ctrl-C a graceful stop
(no new connection, every request in flight answered, exit 0). Secrets never go on the command
line (other users can read it): the shared secret, the Standard Webhooks signing secret, the
ArcGIS webhooks' signature key and the FME Flow token are read from environment variables
whose *names* the options give. Settings come from ``FAIR_*`` environment variables, then
``--set group.field=value``. Settings that cannot work (no photo host at all:
docs/configuration.md) stop it at start, exit 2.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any, Callable, Dict, Optional, Tuple

from ..core.errors import SCHEMA_MISSING, ConfigurationError
from ..gateway.app import DEFAULT_SECRET_HEADER, make_app
from ..core.text.redact import redact_url
from ..services.flow.client import FlowClient
from ..services.config.settings import LiveSettings
from ..core.config.readiness import require_workable
from ..core.config.settings import Settings
from .common import (EXIT_FAILED, EXIT_OK, add_db_option, announce, command, exit_codes,
                     number, port, setting_default, settings_from_args, whole)
from ..gateway.server import DEFAULT_BACKLOG, GatewayServer
from .common import DAY_S

__all__ = ["add_parser", "build_server"]

log = logging.getLogger("fme_ai_resilience.gateway")

#: Signals that stop the server gracefully (SIGBREAK: Ctrl-Break on Windows).
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGBREAK")

SECRET_ENV = "INTAKE_SHARED_SECRET"
SIGNING_ENV = "INTAKE_SIGNING_SECRET"
ARCGIS_KEY_ENV = "ARCGIS_WEBHOOK_SIGNATURE_KEY"
FLOW_TOKEN_ENV = "FME_FLOW_TOKEN"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve", help="run the intake gateway (WSGI on waitress)",
        description="Answer Survey123 webhooks with the full status contract, writing into the "
                    "ledger (a SQLite ledger's schema is created or upgraded at start; a "
                    "PostgreSQL one needs db init). Secrets are read from "
                    "environment variables, never from options. Settings come from FAIR_* "
                    "environment variables, then --set, then the options; the resilience_config "
                    "table applies over all of them.",
        epilog=exit_codes("the ledger could not be opened or the address is taken"))
    add_db_option(p)
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=port, default=8080, metavar="N",
                   help="port, 0 to 65535; 0 picks a free one (default: 8080)")
    p.add_argument("--overload-mode", choices=("park", "reject"),
                   help="past the watermark: park (store DEFERRED) or reject (429) "
                        f"{setting_default('intake.overload_mode')}")
    p.add_argument("--set", dest="values", action="append", default=[], metavar="NAME=VALUE",
                   help="any setting, e.g. --set intake.watermark=200; repeatable (default: "
                        "none)")
    p.add_argument("--config-ttl-seconds", type=number(minimum=0, maximum=DAY_S),
                   default=30.0, metavar="S",
                   help="re-read the resilience_config table at most every S seconds "
                        "(default: 30)")
    p.add_argument("--secret-env", default=None, metavar="VAR",
                   help=f"require header --secret-header to equal ${{VAR}}, e.g. {SECRET_ENV} "
                        f"(default: none, no shared secret)")
    p.add_argument("--secret-header", default=DEFAULT_SECRET_HEADER, metavar="NAME",
                   help=f"the header carrying the shared secret (default: "
                        f"{DEFAULT_SECRET_HEADER})")
    p.add_argument("--signing-secret-env", default=None, metavar="VAR",
                   help=f"require a Standard Webhooks signature with the whsec_ secret in "
                        f"${{VAR}}, e.g. {SIGNING_ENV} (default: none, no signature check)")
    p.add_argument("--arcgis-signature-key-env", default=None, metavar="VAR",
                   help=f"the signatureKey of the ArcGIS layer webhooks delivering here, in "
                        f"${{VAR}}, e.g. {ARCGIS_KEY_ENV}: their deliveries must carry a valid "
                        "x-esriHook-Signature, and the crc_token challenge is answered "
                        "(default: none; docs/intake.md, Senders)")
    p.add_argument("--threads", type=whole(minimum=1, maximum=1000), default=8, metavar="N",
                   help="worker threads running the gateway (default: 8)")
    p.add_argument("--backlog", type=whole(minimum=1, maximum=65_535),
                   default=DEFAULT_BACKLOG, metavar="N",
                   help=f"listen backlog: connections the kernel holds for a burst; Linux caps "
                        f"it at net.core.somaxconn (default: {DEFAULT_BACKLOG})")
    p.add_argument("--connection-limit", type=whole(minimum=1, maximum=100_000),
                   default=500, metavar="N",
                   help="open connections at most; more wait in the backlog (default: 500)")
    p.add_argument("--idle-timeout-seconds", type=number(above=0, maximum=DAY_S),
                   default=30.0, metavar="S",
                   help="close a connection with no request in progress after S seconds "
                        "(default: 30)")
    p.add_argument("--silent-timeout-seconds", type=number(above=0, maximum=DAY_S),
                   default=5.0, metavar="S",
                   help="close a connection that has sent nothing at all after S seconds, so "
                        "a flood of idle connections cannot keep a webhook out (default: 5)")
    p.add_argument("--header-timeout-seconds", type=number(above=0, maximum=DAY_S),
                   default=5.0, metavar="S",
                   help="answer 408 and close a connection whose request line and headers "
                        "have not arrived in full S seconds after it opened (a later request "
                        "on a kept-alive connection: after its first byte), however it sends "
                        "them (default: 5)")
    p.add_argument("--monitor-token-env", default=None, metavar="VAR",
                   help="require Authorization: Bearer ${VAR} for /metrics and the detail of "
                        "/healthz (default: none; then /metrics is open only without "
                        "--secret-env and --signing-secret-env)")
    p.add_argument("--read-timeout-seconds", type=number(above=0, maximum=DAY_S),
                   default=60.0, metavar="S",
                   help="answer 408 to a request not received in full S seconds after its "
                        "first byte (default: 60)")
    p.add_argument("--shutdown-timeout-seconds", type=number(minimum=0, maximum=DAY_S),
                   default=20.0,
                   metavar="S", help="on SIGTERM or Ctrl-C, wait at most S seconds for the "
                                     "requests in flight (default: 20)")
    p.add_argument("--flow-url", metavar="URL",
                   help="FME Flow base URL: answer 503 when it has no engine capacity "
                        "(default: none, no capacity check)")
    p.add_argument("--flow-token-env", default=FLOW_TOKEN_ENV, metavar="VAR",
                   help=f"environment variable holding the FME Flow token (default: "
                        f"{FLOW_TOKEN_ENV})")
    p.set_defaults(func=run)


def _env(name: Optional[str], what: str) -> Optional[str]:
    if not name:
        return None
    value = os.environ.get(name, "")
    if not value:
        raise ConfigurationError(what, name, f"environment variable {name} is empty or unset")
    return value


def _bearer(name: Optional[str]) -> Optional[str]:
    """The monitor token in ``$name``: refused when a request could never present it (blank,
    holding whitespace, or a character outside printable ASCII, which no HTTP header
    carries as written)."""
    value = _env(name, "--monitor-token-env")
    if value is not None and not all("!" <= c <= "~" for c in value):
        raise ConfigurationError("--monitor-token-env", name, f"environment variable {name} "
                                 "must be printable ASCII without spaces: a Bearer token no "
                                 "request could present otherwise")
    return value


def _settings(args: argparse.Namespace) -> Settings:
    return settings_from_args(args.values, {"intake.overload_mode": args.overload_mode})


def build_server(args: argparse.Namespace) -> Tuple[GatewayServer, Any]:
    """The configured server and its store (the caller closes both)."""
    from ..store import open_store

    settings = _settings(args)
    flow = None
    if args.flow_url:
        flow = FlowClient(args.flow_url, _env(args.flow_token_env, "--flow-token-env") or "")
    monitor_token = _bearer(args.monitor_token_env)   # refused before the ledger is opened
    store = open_store(args.db, settings=settings.database)
    try:
        _check_schema(store=store)  # the first read: an unreachable ledger stops serve here
        announce(store=store)
        live = LiveSettings(settings, store=store, ttl_s=args.config_ttl_seconds)
        app = make_app(live, store=store, flow_health=flow.health if flow else None,
                       shared_secret=_env(args.secret_env, "--secret-env"),
                       secret_header=args.secret_header,
                       signing_secret=_env(args.signing_secret_env, "--signing-secret-env"),
                       monitor_token=monitor_token,
                       arcgis_signature_key=_env(args.arcgis_signature_key_env,
                                                 "--arcgis-signature-key-env"))
        # a deployment that could only bury every photo accepts no webhook (exit 2)
        require_workable(live.get(), writes=False)
        server = GatewayServer(
            app, args.host, args.port, threads=args.threads, backlog=args.backlog,
            connection_limit=args.connection_limit, idle_timeout_s=args.idle_timeout_seconds,
            read_timeout_s=args.read_timeout_seconds,
            silent_timeout_s=args.silent_timeout_seconds,
            header_timeout_s=args.header_timeout_seconds,
            shutdown_timeout_s=args.shutdown_timeout_seconds,
            # room above the gateway's own limit, so the gateway answers a 413 itself
            max_request_bytes=2 * live.get().intake.max_body_bytes)
    except BaseException:
        store.close()
        raise
    return server, store


def _check_schema(*, store: Any) -> None:
    """A SQLite ledger brings its schema up to date as it connects; a PostgreSQL one is only
    checked (it never creates its schema by itself): serving starts either way, and intake
    answers 503 "schema missing: run db init" until an operator has run it."""
    version = store.schema_version()
    latest = store.latest_schema_version(store.dialect)
    if version == 0:
        log.warning("gateway: ledger %s: %s; intake answers 503 until then", store.describe(),
                    SCHEMA_MISSING)
    elif version < latest:
        log.warning("gateway: ledger %s: schema at version %d, this release expects %d: run "
                    "db upgrade", store.describe(), version, latest)


def _on_stop_signals(stop: Callable[[], None]) -> Dict[int, Any]:
    """Route the stop signals to ``stop``; returns the handlers they had."""
    previous = {}
    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, lambda signum, frame: stop())
    return previous


def _kernel_backlog_cap() -> Optional[int]:
    """Linux's ceiling on any listen backlog (net.core.somaxconn), or None elsewhere."""
    try:
        with open("/proc/sys/net/core/somaxconn", encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


@command
def run(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # waitress warns once per request queued past the idle threads: a burst is the normal case
    # here (the backlog and the ledger absorb it), so only its errors are shown.
    queue_log = logging.getLogger("waitress.queue")
    if queue_log.level == logging.NOTSET:
        queue_log.setLevel(logging.ERROR)
    try:
        server, store = build_server(args)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    cap = _kernel_backlog_cap()
    if cap is not None and cap < args.backlog:
        log.warning("gateway: the kernel caps the listen backlog at %d (net.core.somaxconn), "
                    "below the %d asked for", cap, args.backlog)
    # the stop signals are routed before the address is printed: a client that connects the
    # moment it reads the address, and a stop sent right after, find a graceful stop
    previous = _on_stop_signals(server.stop)
    host, port = server.address
    print(f"intake gateway on http://{host}:{port}/ (health: /healthz), ledger "
          f"{redact_url(args.db)}; SIGTERM or Ctrl-C stops", flush=True)
    try:
        server.serve()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        server.close()
        store.close()
    return EXIT_OK
