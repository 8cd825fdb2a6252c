"""ArcGIS REST: one bounded exchange, a feature layer or table, the processor's credential."""

__all__: "list[str]" = []
