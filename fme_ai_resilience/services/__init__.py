"""The services: everything that does I/O through what it is handed (a store, an HTTP session,
a clock). Each module is named for the service it holds; docs/architecture.md is the map."""

__all__: "list[str]" = []
