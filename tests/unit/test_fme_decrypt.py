"""What the callers hand FME to decrypt: only a value in the exact shape FME encrypts,
``fme_decrypt(<base64>)``, never text a webhook sender wrote into an FME function."""
from __future__ import annotations

import pytest

from fme_ai_resilience.fme import IntakeCaller
from fme_ai_resilience.fme.decrypt import decrypted, is_encrypted
from fme_ai_resilience.testing import FakeFeature, fme_encrypt, run_caller


#: Webhook bodies that start with ``fme_decrypt(`` and end with ``)`` but carry more FME
#: function text (``@Tcl2`` runs Tcl, hence commands, on the engine).

from helpers.fme_fixtures import SERVICE, body


INJECTIONS = (
    'fme_decrypt(x),@Tcl2("exec touch /tmp/fair-pwned"))',
    "fme_decrypt(eA==)@Evaluate([exec id])",
    "fme_decrypt(a) fme_decrypt(b)",
    "fme_decrypt(eA==\n)",
)


@pytest.mark.parametrize("value", INJECTIONS)
def test_function_text_that_only_looks_encrypted_is_never_handed_to_fme(value):
    """Only FME's cipher shape counts as encrypted: anything else is taken as plain text."""
    assert not is_encrypted(value)
    assert decrypted("FAIR_WEBHOOK_BODY", value) == value


@pytest.mark.parametrize("value", INJECTIONS)
def test_a_webhook_body_never_reaches_fmes_function_evaluator(value, fair_db, fake_clock,
                                                              monkeypatch):
    """FAIR_WEBHOOK_BODY is what the webhook's sender wrote (the Automation maps it): a
    body shaped like ``fme_decrypt(...)`` with FME functions inside is registered as a bad
    body (a dead letter), never evaluated by ``performFunction``."""
    evaluated = []
    real = FakeFeature.performFunction

    def spy(self, text):
        evaluated.append(text)
        return real(self, text)

    monkeypatch.setattr(FakeFeature, "performFunction", spy)
    run = run_caller(IntakeCaller, [{}], {"FAIR_DB": fair_db, "FAIR_WEBHOOK_BODY": value,
                                          "FAIR_INTAKE_FEATURE_SERVICES": SERVICE},
                     clock=fake_clock)
    assert evaluated == []
    (out,) = run.rejected
    assert out.getAttribute("fme_rejection_code") != "CONFIGURATION"


def test_a_real_cipher_is_still_decrypted(fair_db, fake_clock):
    """The strict shape keeps what FME writes working: an encrypted body is decrypted and
    registered."""
    run = run_caller(IntakeCaller, [{}], {"FAIR_DB": fair_db,
                                          "FAIR_INTAKE_FEATURE_SERVICES": SERVICE,
                                          "FAIR_WEBHOOK_BODY": fme_encrypt(body())},
                     clock=fake_clock)
    assert run.rejected == [] and run.output[0].getAttribute("fair_status") == "PENDING"
