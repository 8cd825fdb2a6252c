"""The HTTP sessions every outbound call runs on."""

__all__: "list[str]" = []
