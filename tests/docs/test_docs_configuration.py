"""docs/configuration.md lists every setting with the default the code has."""
from __future__ import annotations

import re

from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.core.config.settings import Settings

from helpers import REPO


DOC = REPO / "docs" / "configuration.md"

#: A settings row: | `group.field` | `default` or (empty) | unit | meaning |
ROW = re.compile(r"^\|\s*`(?P<name>[a-z]+\.[a-z0-9_]+)`\s*\|\s*(?P<default>[^|]*?)\s*\|", re.M)
EMPTY = "(empty)"


def _documented():
    rows = {}
    for match in ROW.finditer(DOC.read_text(encoding="utf-8")):
        name = match.group("name")
        assert name not in rows, f"{name} has two rows in {DOC.name}"
        rows[name] = match.group("default")
    return rows


def _shown_value(name, cell):
    """The value a default cell stands for, read the way a FAIR_* variable would be."""
    text = cell.strip()
    if text == EMPTY:
        return EMPTY
    assert text.startswith("`") and text.endswith("`") and len(text) > 2, (
        f"{name}: the default {cell!r} must be `value` or {EMPTY}")
    try:
        return Settings().with_values({name: text[1:-1]}).as_flat_dict()[name]
    except ConfigurationError as exc:
        raise AssertionError(f"{name}: the documented default {cell!r} is not valid: {exc}") \
            from None


def test_every_setting_is_documented_with_its_default():
    """Each setting in Settings().as_flat_dict() has a row whose default equals the code's."""
    documented = _documented()
    code = Settings().as_flat_dict()
    missing = sorted(set(code) - set(documented))
    assert not missing, f"settings missing from {DOC.name}: {missing}"
    for name, default in code.items():
        shown = _shown_value(name, documented[name])
        if shown == EMPTY:
            assert len(default) == 0, f"{name}: documented as empty, code default {default!r}"
        else:
            assert shown == default and type(shown) is type(default), (
                f"{name}: documented default {documented[name]!r}, code default {default!r}")


def test_no_documented_setting_is_unknown():
    """Every settings row in docs/configuration.md names a setting that exists."""
    unknown = sorted(set(_documented()) - set(Settings().as_flat_dict()))
    assert not unknown, f"{DOC.name} documents settings the code does not have: {unknown}"
