"""Number checks: every bad number is a ConfigurationError, even one no float can hold."""
from __future__ import annotations

import pytest

from fme_ai_resilience.core.checks import finite, finite_number
from fme_ai_resilience.core.errors import ConfigurationError


@pytest.mark.parametrize("value, expected", [
    (0.5, True), (3, True), (10 ** 400, True), (-(10 ** 400), True), (float("inf"), False),
    (float("nan"), False), (True, False), ("1", False), (None, False)])
def test_finite_number_never_raises(value, expected):
    """Huge integers are finite numbers (compared exactly); bools, text and inf are not."""
    assert finite_number(value) is expected


@pytest.mark.parametrize("value", [10 ** 400, -(10 ** 400), float("inf")])
def test_finite_refuses_what_no_float_holds_as_a_configuration_error(value):
    """finite() of 10**400 is a ConfigurationError, not an OverflowError."""
    with pytest.raises(ConfigurationError, match="must be finite"):
        finite("x", value)
