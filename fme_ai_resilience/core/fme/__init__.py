"""What FME reads: the workspace files, the published parameters, the FME Package and the
FME Flow deployment, rendered and checked as text."""

__all__: "list[str]" = []
