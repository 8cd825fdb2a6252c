"""The processor (WS-02): claimed tasks through download, analysis and write-back, and the
review queue."""

__all__: "list[str]" = []
