"""docs/testing.md's sample: the test an FME author writes for a PythonCaller script of their
own runs and passes with the plugin's fixtures, and the page shows that very file."""
from __future__ import annotations

import re

from helpers import REPO


pytest_plugins = ["pytester"]

ROOT = REPO
SAMPLE = ROOT / "docs" / "samples" / "test_review_router.py"
PAGE = ROOT / "docs" / "testing.md"
BLOCK = re.compile(r"<!-- sample: docs/samples/test_review_router.py -->\n```python\n(.*?)```",
                   re.S)


def test_the_page_shows_the_sample_file_exactly():
    """The python block after the sample marker is the file, character for character."""
    (shown,) = BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert shown == SAMPLE.read_text(encoding="utf-8")


def test_the_sample_passes_in_a_session_of_its_own(pytester):
    """Run as the author runs it (fake modules for the session, as the page's setup.cfg
    says): every test of the sample passes."""
    pytester.makeini("[pytest]\nfme_fake_modules = true\n")
    pytester.makepyfile(test_review_router=SAMPLE.read_text(encoding="utf-8"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)


def test_without_the_option_the_script_cannot_even_be_imported(pytester):
    """The option is what makes `import fmeobjects` at a script's top work: without it the
    module fails at collection (nothing is faked unasked)."""
    pytester.makepyfile(test_review_router=SAMPLE.read_text(encoding="utf-8"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
