"""``package build --out`` writes its file atomically and follows no link planted where it
writes, and a path it cannot write is one line and exit 2, never a traceback."""
from __future__ import annotations

import os

import pytest

from fme_ai_resilience import __version__
from fme_ai_resilience.cli import main
from fme_ai_resilience.core.fme import fpkg

from helpers.wheelhouse import house  # noqa: F401 (a fixture)

pytest.importorskip("fme_packager")
NAME = fpkg.fpkg_filename(__version__)


def test_build_follows_no_link_planted_at_its_part_or_target_name(tmp_path, house, capsys):
    """Guarantee: links planted at ``--out``'s predictable names (the package's ``.part`` and
    the package itself) are not followed: the files they point to keep their bytes, and the
    package is a regular file."""
    out = tmp_path / "dist"
    out.mkdir()
    victims = {name: tmp_path / f"victim-{i}" for i, name in enumerate((NAME + ".part", NAME))}
    for name, victim in victims.items():
        victim.write_bytes(b"precious")
        os.symlink(victim, out / name)
    assert main(["package", "build", "--out", str(out), "--wheelhouse", str(house)]) == 0
    capsys.readouterr()
    assert [v.read_bytes() for v in victims.values()] == [b"precious"] * len(victims)
    package = out / NAME
    assert package.is_file() and not package.is_symlink()
    assert package.read_bytes()[:2] == b"PK"


@pytest.mark.parametrize("where", ["a file", "under a file", "a directory at its name"])
def test_an_out_that_cannot_be_written_is_one_line_and_exit_2(where, tmp_path, house,
                                                              capsys):
    """Guarantee: ``--out`` naming a file, a path under a file, or a directory already
    holding a directory of the package's name: exit 2, one line on stderr, no traceback."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    out = {"a file": blocker, "under a file": blocker / "dist",
           "a directory at its name": tmp_path / "dist"}[where]
    if where == "a directory at its name":
        (out / NAME).mkdir(parents=True)
    code = main(["package", "build", "--out", str(out), "--wheelhouse", str(house)])
    err = capsys.readouterr().err
    assert (code, err.count("\n")) == (2, 1), err
    assert err.startswith("error: ") and "Traceback" not in err
    assert blocker.read_text() == "not a directory"
