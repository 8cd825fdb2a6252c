"""The Vision AI's answers: requests as values, provider answers mapped onto one assessment,
errors inside a 200 body, validation."""

__all__: "list[str]" = []
