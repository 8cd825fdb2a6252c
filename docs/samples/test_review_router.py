"""Tests of my own PythonCaller script, run without FME (fme_ai_resilience.testing)."""
import fme
import fmeobjects

from fme_ai_resilience.fme import ProcessorCaller
from fme_ai_resilience.testing import FakeFeature, Fault, run_caller

#: The feature service my surveys write to: its host is where WS-02 downloads photos from.
SERVICE = "https://services.example.com/arcgis/rest/services/inspection/FeatureServer"


class ReviewRouter:
    """My PythonCaller after WS-02's: flags uncertain conclusions for a person to look at.

    Published parameter REVIEW_BELOW: the confidence under which a task needs review.
    """

    def __init__(self):
        self.below = float(fme.macroValues.get("REVIEW_BELOW") or "0.8")

    def input(self, feature):
        if feature.getAttribute("fair_key") is None:
            feature.setAttribute("fme_rejection_code", "NOT_A_TASK")
            feature.setAttribute("fme_rejection_message", "no fair_key: not a WS-02 task")
            self.pyoutput(feature, output_tag="<Rejected>")
            return
        confidence = feature.getAttribute("fair_confidence")
        if confidence in (None, ""):          # missing, or null: nothing was concluded
            feature.setAttributeNullWithType("needs_review", fmeobjects.FME_ATTR_STRING)
        else:
            feature.setAttribute("needs_review", "yes" if confidence < self.below else "no")
        fmeobjects.FMELogFile().logMessageString(
            f"routed {feature.getAttribute('fair_key')}", fmeobjects.FME_INFORM)
        self.pyoutput(feature)

    def close(self):
        pass


def test_uncertain_conclusions_need_review(fake_fme, fme_macros):
    """A confidence below REVIEW_BELOW is flagged; a parked task's null stays null."""
    fme_macros["REVIEW_BELOW"] = "0.9"
    parked = FakeFeature({"fair_key": "k2", "fair_status": "FAILED"})
    parked.setAttributeNullWithType("fair_confidence", fmeobjects.FME_ATTR_STRING)
    run = run_caller(ReviewRouter, [{"fair_key": "k1", "fair_confidence": 0.75}, parked],
                     fme_macros)
    assert [f.getAttribute("needs_review") for f in run.output] == ["yes", ""]
    assert run.output[1].isAttributeNull("needs_review")
    assert run.messages("INFORM") == ["routed k1", "routed k2"]


def test_a_feature_without_a_key_is_rejected():
    """Anything but a WS-02 task goes to <Rejected> with its code."""
    run = run_caller(ReviewRouter, [{"asset_id": "HYD-1"}], {})
    assert run.output == []
    assert run.rejected[0].getAttribute("fme_rejection_code") == "NOT_A_TASK"


def test_the_processor_without_a_vision_endpoint_is_refused(fair_db):
    """My workspace's WS-02 parameters, missing the endpoint: rejected, naming it."""
    run = run_caller(ProcessorCaller, [{}], {"FAIR_DB": fair_db})
    assert run.rejected[0].getAttribute("fme_rejection_message").startswith(
        "FAIR_VISION_ENDPOINT=")


def test_nothing_due_means_nothing_to_route(fair_db, fake_clock, fake_vision):
    """An empty ledger: WS-02 calls no Vision AI and emits nothing for my router."""
    fake_vision.script(Fault(429, retry_after=30))
    run = run_caller(ProcessorCaller, [{}], {"FAIR_DB": fair_db,
                                             "FAIR_VISION_ENDPOINT": fake_vision.endpoint,
                                             "FAIR_INTAKE_FEATURE_SERVICES": SERVICE},
                     clock=fake_clock)
    assert run.output == run.rejected == [] and fake_vision.calls == []
    assert run_caller(ReviewRouter, run.output, {}).output == []
