"""Intake: webhook bodies into the ledger with the HTTP status contract, and the photos a layer
lists for a webhook that carried none."""

__all__: "list[str]" = []
