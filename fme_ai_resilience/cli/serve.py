"""``fme-ai-resilience serve``: run the intake gateway with the standard library's WSGI server.

Secrets never go on the command line (other users can read it): the shared secret, the
Standard Webhooks signing secret and the FME Flow token are read from environment variables
whose *names* the options give. Settings come from ``FAIR_*`` environment variables, then
``--set group.field=value``. For production, run ``fme_ai_resilience.gateway.make_app`` under
a WSGI server such as waitress or gunicorn (docs/intake.md).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Optional, Tuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from ..errors import ConfigurationError
from ..gateway import DEFAULT_SECRET_HEADER, make_app
from ..redact import redact_text, redact_url
from ..services.flow import FlowClient
from ..services.live_settings import LiveSettings
from ..settings import Settings
from .common import (EXIT_FAILED, EXIT_OK, add_db_option, command, exit_codes, number, port,
                     setting_default, settings_from_args)

__all__ = ["add_parser", "build_server"]

log = logging.getLogger("fme_ai_resilience.gateway")

SECRET_ENV = "INTAKE_SHARED_SECRET"
SIGNING_ENV = "INTAKE_SIGNING_SECRET"
FLOW_TOKEN_ENV = "FME_FLOW_TOKEN"


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve", help="run the intake gateway",
        description="Answer Survey123 webhooks with the full status contract, writing into the "
                    "ledger (its schema is created or upgraded at start). Secrets are read from "
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
    p.add_argument("--config-ttl-seconds", type=number(minimum=0), default=30.0, metavar="S",
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
    p.add_argument("--flow-url", metavar="URL",
                   help="FME Flow base URL: answer 503 when it has no engine capacity "
                        "(default: none, no capacity check)")
    p.add_argument("--flow-token-env", default=FLOW_TOKEN_ENV, metavar="VAR",
                   help=f"environment variable holding the FME Flow token (default: "
                        f"{FLOW_TOKEN_ENV})")
    p.set_defaults(func=run)


class _QuietHandler(WSGIRequestHandler):
    """Request lines go to logging without their query string (which may carry a token)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        # wsgiref reports malformed request lines verbatim: they may carry a token parameter.
        log.info("%s %s", self.address_string(), redact_text(format % args))

    def log_request(self, code: Any = "-", size: Any = "-") -> None:
        # A request line the stdlib could not parse leaves path (and command) unset.
        path = (getattr(self, "path", None) or "-").split("?", 1)[0]
        log.info("%s %s %s -> %s", self.address_string(), getattr(self, "command", None) or "-",
                 path, code)


def _env(name: Optional[str], what: str) -> Optional[str]:
    if not name:
        return None
    value = os.environ.get(name, "")
    if not value:
        raise ConfigurationError(what, name, f"environment variable {name} is empty or unset")
    return value


def _settings(args: argparse.Namespace) -> Settings:
    return settings_from_args(args.values, {"intake.overload_mode": args.overload_mode})


def build_server(args: argparse.Namespace) -> Tuple[WSGIServer, Any]:
    """The configured server and its store (the caller closes both)."""
    from ..store import open_store

    settings = _settings(args)
    flow = None
    if args.flow_url:
        flow = FlowClient(args.flow_url, _env(args.flow_token_env, "--flow-token-env") or "")
    store = open_store(args.db, init_schema=True)
    try:
        live = LiveSettings(settings, store=store, ttl_s=args.config_ttl_seconds)
        app = make_app(live, store=store, flow_health=flow.health if flow else None,
                       shared_secret=_env(args.secret_env, "--secret-env"),
                       secret_header=args.secret_header,
                       signing_secret=_env(args.signing_secret_env, "--signing-secret-env"))
        server = make_server(args.host, args.port, app, handler_class=_QuietHandler)
    except BaseException:
        store.close()
        raise
    return server, store


@command
def run(args: argparse.Namespace) -> int:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        server, store = build_server(args)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    host, port = server.server_address[:2]
    print(f"intake gateway on http://{host}:{port}/ (health: /healthz), ledger "
          f"{redact_url(args.db)}; Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        store.close()
    return EXIT_OK
