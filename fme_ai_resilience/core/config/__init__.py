"""Settings: every threshold in one frozen value, converted and validated once."""

__all__: "list[str]" = []
