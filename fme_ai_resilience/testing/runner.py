"""Runs a PythonCaller class the way FME does, without FME: :func:`run_caller`.

FME makes the class with no arguments, injects ``pyoutput``, calls ``input(feature)`` per
feature and ``close()`` at the end. :func:`run_caller` does the same with
:class:`~.features.FakeFeature` features, the published parameters given (as strings, like
``fme.macroValues``) and the fake ``fme`` and ``fmeobjects`` modules in ``sys.modules`` for
the length of the call only, and returns what left each output port and what was logged.
It is a plain function: it works in pytest, in a script and in several threads at once
(each run sees its own parameters and log).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import requests

from ..core.clock import Clock
from ..fme.callers import REJECTED_TAG, injected
from .features import FakeFeature, FakeFME, FMEException, LogLine, installed_fme, macro_strings
from .photos import PhotoHost

__all__ = ["run_caller", "CallerRun", "OUTPUT", "REJECTED"]

#: The output tag of the PythonCaller's Output port (what a plain ``pyoutput(f)`` reaches).
OUTPUT = "PYOUTPUT"
#: The output tag of the ``<Rejected>`` port.
REJECTED = REJECTED_TAG

FeatureLike = Union[FakeFeature, Mapping[str, Any]]


@dataclass
class CallerRun:
    """What one :func:`run_caller` produced.

    ``outputs`` holds the features by output tag (:data:`OUTPUT`, :data:`REJECTED`), in the
    order they left; ``log`` the lines written to FME's log; ``caller`` the (closed) instance;
    ``output_tags`` whether the run modelled an FME with output tags (2024.0 and later).
    """

    outputs: Dict[str, List[Any]] = field(default_factory=dict)
    log: List[LogLine] = field(default_factory=list)
    caller: Any = None
    output_tags: bool = True

    @property
    def output(self) -> List[Any]:
        """The features that left through the Output port."""
        return list(self.outputs.get(OUTPUT, []))

    @property
    def rejected(self) -> List[Any]:
        """The features sent to ``<Rejected>``; without output tags, the Output features
        that carry ``fme_rejection_code`` (where such a release sends them)."""
        out = list(self.outputs.get(REJECTED, []))
        if not self.output_tags:
            out += [f for f in self.output if f.getAttribute("fme_rejection_code") is not None]
        return out

    @property
    def accepted(self) -> List[Any]:
        """The Output features that are not rejections."""
        return [f for f in self.output if f.getAttribute("fme_rejection_code") is None]

    def messages(self, severity: Optional[str] = None) -> List[str]:
        """The logged texts, of one severity (``"INFORM"``, ``"WARN"``, ``"ERROR"``) or all."""
        return [line.message for line in self.log if severity in (None, line.severity)]


def _pyoutput(outputs: Dict[str, List[Any]], tags: Sequence[str],
              output_tags: bool) -> Callable[..., None]:
    """The ``pyoutput`` FME injects: with output tags (an unknown tag is an error), or, like
    FME before 2024.0, without (an ``output_tag`` keyword is then Python's TypeError)."""
    def keep(feature: Any, tag: str) -> None:
        if not callable(getattr(feature, "getAttribute", None)):
            raise FMEException(f"pyoutput needs a feature, got a {type(feature).__name__}")
        outputs.setdefault(tag, []).append(feature)

    def tagged(feature: Any, output_tag: str = OUTPUT) -> None:
        if output_tag not in tags:
            raise FMEException(f"unknown output tag {output_tag!r}: this PythonCaller has "
                               f"{list(tags)}")
        keep(feature, output_tag)

    def untagged(feature: Any) -> None:
        keep(feature, OUTPUT)

    return tagged if output_tags else untagged


def _as_feature(item: FeatureLike) -> FakeFeature:
    if isinstance(item, FakeFeature):
        return item
    if isinstance(item, Mapping):
        return FakeFeature(item)
    raise FMEException(f"a feature is a FakeFeature or a mapping of attributes, got a "
                       f"{type(item).__name__}")


def run_caller(caller_class: Callable[[], Any], features: Iterable[FeatureLike] = (),
               macros: Optional[Mapping[str, Any]] = None, *, clock: Optional[Clock] = None,
               session: Optional[requests.Session] = None, output_tags: bool = True,
               tags: Sequence[str] = (OUTPUT, REJECTED),
               photo_host: Optional[PhotoHost] = None) -> CallerRun:
    """Make ``caller_class()``, feed it ``features`` and close it, as FME would.

    ``features`` are :class:`FakeFeature` objects or mappings of attributes (one feature
    each; FME's Creator gives one feature with none: ``[{}]``). ``macros`` are the published
    parameters (values become strings, None an empty one). ``clock`` and ``session`` replace
    the system clock and HTTP session of the library's callers made here (the callers of
    :mod:`fme_ai_resilience.fme`). ``output_tags=False`` models FME before 2024.0, whose
    ``pyoutput`` takes no output tag; ``tags`` are the PythonCaller's output tags.
    ``photo_host`` (a :class:`~.photos.PhotoHost`) adds the published parameters that let
    the downloader fetch its photos (given ``macros`` win).

    What an FME run would fail on (an exception from ``input`` or ``close``) propagates, after
    ``close()`` was called and the fake modules taken out again.
    """
    given = {**(photo_host.macros if photo_host is not None else {}), **(macros or {})}
    fake = FakeFME(macros=macro_strings(given))
    run = CallerRun(output_tags=output_tags)
    with installed_fme(fake), injected(clock=clock, session=session):
        caller = caller_class()
        run.caller = caller
        caller.pyoutput = _pyoutput(run.outputs, tuple(tags), output_tags)
        try:
            for item in features:
                caller.input(_as_feature(item))
        finally:
            caller.close()
    run.log = list(fake.log)
    return run
