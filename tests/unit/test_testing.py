"""The test kit for FME authors: FakeFeature's FME semantics, the fake fme and fmeobjects
modules and how they are put back, run_caller, the scripted Vision service and the plugin."""
from __future__ import annotations

import sys
import threading
import types

import pytest
import requests
import responses

from fme_ai_resilience.core.clock import FakeClock
from fme_ai_resilience.core.errors import ConfigurationError
from fme_ai_resilience.testing import (OUTPUT, REJECTED, FakeFeature, FakeFME, FakeVision, Fault,
                                       FMEException, installed_fme, run_caller)

pytest_plugins = ["pytester"]


# -- FakeFeature ----------------------------------------------------------------------------

def test_missing_is_none_and_null_is_an_empty_string():
    """getAttribute: None for a missing attribute, "" for a null one; the checks tell them
    apart, and a null one is listed among the names."""
    f = FakeFeature()
    f.setAttributeNullWithType("gone", 11)
    assert (f.getAttribute("absent"), f.getAttribute("gone")) == (None, "")
    assert f.isAttributeMissing("absent") and not f.isAttributeNull("absent")
    assert f.isAttributeNull("gone") and not f.isAttributeMissing("gone")
    assert f.getAllAttributeNames() == ["gone"] and f.getAttributeType("gone") == 11


def test_setting_none_stores_an_empty_string_not_a_null():
    """setAttribute(name, None) is FME's empty string: present, not null."""
    f = FakeFeature({"x": None})
    assert f.getAttribute("x") == "" and not f.isAttributeNull("x")


@pytest.mark.parametrize("value, stored", [
    (7, 7), (2 ** 31 - 1, 2 ** 31 - 1), (2 ** 31, -2 ** 31), (2 ** 32 + 5, 5),
    (1.5, 1.5), ("text", "text"), (True, True), (b"\x00\x01", b"\x00\x01"),
    (bytearray(b"ab"), b"ab"), ([1, "a", None, 2.5], ["1", "a", "", "2.5"]),
])
def test_values_are_stored_as_fme_stores_them(value, stored):
    """int is Int32 (past the range it wraps: store big integers as strings), float Real64,
    str, bool, binary; a list's elements become text."""
    f = FakeFeature()
    f.setAttribute("v", value)
    assert f.getAttribute("v") == stored and type(f.getAttribute("v")) is type(stored)


def test_a_value_fme_cannot_hold_is_refused():
    """A dict is no attribute value: FMEException naming the attribute."""
    with pytest.raises(FMEException, match="'meta'"):
        FakeFeature().setAttribute("meta", {"a": 1})


def test_remove_clone_and_feature_type():
    """removeAttribute forgets a value or a null; clone copies values, nulls and the type,
    and a change to the copy leaves the original alone."""
    f = FakeFeature({"a": 1, "b": [1]}, feature_type="Creator_CREATED")
    f.setAttributeNullWithType("n", 11)
    copy = f.clone()
    f.removeAttribute("a")
    f.removeAttribute("n")
    copy.setAttribute("b", [2])
    assert f.getAllAttributeNames() == ["b"] and f.getAttribute("b") == ["1"]
    assert copy.as_dict() == {"a": 1, "b": ["2"], "n": None}
    assert copy.getFeatureType() == "Creator_CREATED"


# -- the fake modules -----------------------------------------------------------------------

def test_installed_fme_serves_macros_and_log_and_puts_back_what_was_there():
    """Inside: import fme / fmeobjects give the fakes, macroValues and FMELogFile serve this
    FakeFME. After: an earlier module is back, an absent one absent again."""
    earlier = types.ModuleType("fme")
    sys.modules["fme"] = earlier
    try:
        with installed_fme(FakeFME(macros={"FAIR_DB": "x"})) as fake:
            import fme
            import fmeobjects
            assert fme.macroValues == {"FAIR_DB": "x"}
            fmeobjects.FMELogFile().logMessageString("hello", fmeobjects.FME_WARN)
            assert fmeobjects.FMEFeature is FakeFeature
        assert fake.messages("WARN") == ["hello"]
        assert sys.modules["fme"] is earlier and "fmeobjects" not in sys.modules
    finally:
        sys.modules.pop("fme", None)


def test_two_threads_each_see_their_own_parameters_and_log():
    """Overlapping installations in two threads: each sees its own macroValues and log; the
    modules leave when the last one ends."""
    seen = {}
    ready = threading.Barrier(2)

    def work(name):
        with installed_fme(FakeFME(macros={"who": name})) as fake:
            ready.wait()
            import fme
            import fmeobjects
            seen[name] = fme.macroValues["who"]
            fmeobjects.FMELogFile().logMessageString(name)
            ready.wait()
        seen[name + "-log"] = fake.messages()

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": "a", "b": "b", "a-log": ["a"], "b-log": ["b"]}
    assert "fme" not in sys.modules and "fmeobjects" not in sys.modules


# -- run_caller ------------------------------------------------------------------------------

class Doubler:
    """An FME author's own PythonCaller: doubles 'n', rejects what has none."""

    def __init__(self):
        import fme
        self.factor = int(fme.macroValues.get("FACTOR", "2"))
        self.closed = False

    def input(self, feature):
        import fmeobjects
        n = feature.getAttribute("n")
        if n is None:
            feature.setAttribute("fme_rejection_code", "NO_N")
            self.pyoutput(feature, output_tag="<Rejected>")
            return
        feature.setAttribute("n", n * self.factor)
        fmeobjects.FMELogFile().logMessageString(f"doubled {n}", fmeobjects.FME_INFORM)
        self.pyoutput(feature)

    def close(self):
        self.closed = True


def test_run_caller_feeds_features_and_sorts_what_leaves_by_port():
    """Mappings become features, macros strings; Output and <Rejected> kept apart in order;
    the log lines and the closed instance come back; no fake module is left behind."""
    run = run_caller(Doubler, [{"n": 2}, {}, FakeFeature({"n": 5})], {"FACTOR": 3})
    assert [f.getAttribute("n") for f in run.output] == [6, 15]
    assert [f.getAttribute("fme_rejection_code") for f in run.rejected] == ["NO_N"]
    assert set(run.outputs) == {OUTPUT, REJECTED}
    assert run.messages("INFORM") == ["doubled 2", "doubled 5"]
    assert run.caller.closed is True
    assert "fme" not in sys.modules and "fmeobjects" not in sys.modules


def test_without_output_tags_the_keyword_is_a_type_error():
    """output_tags=False models FME before 2024.0: pyoutput(f, output_tag=...) raises
    Python's TypeError, which the author's script must handle."""
    with pytest.raises(TypeError):
        run_caller(Doubler, [{}], {}, output_tags=False)


def test_an_unknown_output_tag_or_a_non_feature_is_an_fme_error():
    """FME refuses an output tag the PythonCaller does not have, and anything not a feature."""
    class Wrong:
        def input(self, feature):
            self.pyoutput(feature, output_tag="Elsewhere")

        def close(self):
            pass

    with pytest.raises(FMEException, match="Elsewhere"):
        run_caller(Wrong, [{}], {})
    with pytest.raises(FMEException, match="feature"):
        run_caller(Wrong, ["not a feature"], {})


def test_a_failing_input_propagates_after_close():
    """What would fail the translation fails the call; close() ran and the fakes are gone."""
    closed = []

    class Boom(Doubler):
        def input(self, feature):
            raise KeyError("boom")

        def close(self):
            closed.append(True)

    with pytest.raises(KeyError):
        run_caller(Boom, [{}], {})
    assert closed == [True] and "fme" not in sys.modules


def test_the_clock_reaches_the_library_callers():
    """run_caller(clock=...) hands the clock to the library's callers made in it."""
    from fme_ai_resilience.fme import CompensatorCaller

    clock = FakeClock(1_800_000_000.0)
    run = run_caller(CompensatorCaller, [], {}, clock=clock)
    assert run.caller.clock is clock and run.output == []
    assert CompensatorCaller().clock is not clock


# -- FakeVision --------------------------------------------------------------------------------

def test_fake_vision_plays_its_script_then_answers_well():
    """Statuses, a Retry-After, drift, HTML, then good answers; every call recorded."""
    vision = FakeVision().script(503, Fault(429, retry_after=7), "drift", "html")
    with responses.RequestsMock() as mock:
        vision.register(mock)
        answers = [requests.post(vision.endpoint, data=b"img", timeout=5) for _ in range(5)]
    assert [a.status_code for a in answers] == [503, 429, 200, 502, 200]
    assert answers[1].headers["Retry-After"] == "7"
    assert "score" in answers[2].json() and "confidence" not in answers[2].json()
    assert answers[4].json() == vision.answer()
    assert vision.calls == [(503, "503"), (429, "429"), (200, "drift"), (502, "html"),
                            (200, "ok")]
    assert vision.left == 0


@pytest.mark.parametrize("step", ["sometimes", 99, True, 700])
def test_fake_vision_refuses_a_step_it_cannot_play(step):
    """A misspelt step is refused at once, naming it."""
    with pytest.raises(ConfigurationError):
        FakeVision().script(step)


# -- the pytest plugin -------------------------------------------------------------------------

def test_the_plugin_fixtures_restore_everything(pytester):
    """In a pytest run of its own, with nothing but the installed package: the fixtures
    give the fakes inside a test and leave sys.modules clean for the next one."""
    pytester.makepyfile(test_author="""
        import sys

        def test_inside(fake_fme, fme_macros, fake_clock, fair_db):
            fme_macros["FAIR_DB"] = fair_db
            import fme
            assert fme.macroValues["FAIR_DB"].startswith("sqlite:///")
            fake_clock.advance(5)

        def test_after():
            assert "fme" not in sys.modules and "fmeobjects" not in sys.modules

        def test_vision(fake_vision):
            import requests
            fake_vision.fail(503)
            assert requests.post(fake_vision.endpoint, data=b"x").status_code == 503
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_session_option_fakes_the_modules_for_collection(pytester):
    """--fme-fake-modules: a test module importing fmeobjects at its top is collected and
    runs; the modules serve each fixture's own parameters."""
    pytester.makepyfile(test_script="""
        import fme
        import fmeobjects

        def test_top_level_imports(fme_macros):
            fme_macros["X"] = "1"
            assert fme.macroValues == {"X": "1"} and fmeobjects.FMEFeature().getAttribute("a") is None
    """)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fme-fake-modules") \
        .assert_outcomes(passed=1)


def test_ws02_runs_through_to_a_written_assessment_with_the_kits_photo_host(
        fair_db, fake_clock, fake_vision, photo_host):
    """The kit's photo host (a real server on 127.0.0.1 the downloader accepts, its
    parameters merged by run_caller) and the fake Vision AI: a webhook registered by WS-01,
    then WS-02 downloads the photo once, asks the Vision AI once and hands the assessment to
    the workspace's writers (ai_condition ...); the ledger says SUCCEEDED."""
    from fme_ai_resilience.fme import IntakeCaller, ProcessorCaller
    from fme_ai_resilience.store import open_store
    from helpers.fme_fixtures import body

    url = photo_host.add("hydrant.jpg")
    intake = run_caller(IntakeCaller, [{"message": body(photo=url)}], {"FAIR_DB": fair_db},
                        clock=fake_clock, photo_host=photo_host)
    key = intake.output[0].getAttribute("fair_key")
    run = run_caller(ProcessorCaller, [{}], {
        "FAIR_DB": fair_db, "FAIR_VISION_ENDPOINT": fake_vision.endpoint,
        "FAIR_WRITEBACK_SINK": "collect"}, clock=fake_clock, photo_host=photo_host)
    (task,) = run.output
    assert (task.getAttribute("fair_status"), task.getAttribute("ai_condition"),
            task.getAttribute("ai_confidence")) == ("SUCCEEDED", "good", 0.9)
    assert [path for path, _ in photo_host.requests] == ["/photos/hydrant.jpg"]
    assert fake_vision.calls == [(200, "ok")]
    with open_store(fair_db) as store:
        assert store.get(key).status.value == "SUCCEEDED"
