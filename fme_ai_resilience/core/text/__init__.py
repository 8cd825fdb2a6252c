"""Text from outside made safe: secrets redacted, control characters escaped, names compared
without case, bounded JSON decoding."""

__all__: "list[str]" = []
