"""FME Flow REST: the engine-capacity probe, uploads, schedules and job submission."""

__all__: "list[str]" = []
