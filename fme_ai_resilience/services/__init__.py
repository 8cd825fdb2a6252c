"""The services: everything that does I/O through what it is handed (a store, an HTTP session,
a clock). Each module is named for the service it holds; docs/architecture.md is the map.

The library's logger (``fme_ai_resilience``) gets a NullHandler here, the first place a
module that logs is loaded from, as a library's logger should: an application (or FME,
through the callers' forwarding) decides where its warnings go, and without one they are not
printed to stderr by Python's last-resort handler.
"""
import logging

logging.getLogger("fme_ai_resilience").addHandler(logging.NullHandler())

__all__: "list[str]" = []
