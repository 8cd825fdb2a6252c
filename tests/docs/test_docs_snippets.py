"""Every shell snippet in README.md and docs/*.md runs, against the installed command.

How a snippet is run:

* Every fenced ``sh``, ``shell``, ``bash`` or ``console`` block runs with ``bash -e``, in
  document order, in one fresh temporary directory per document: files a block creates are
  there for the blocks after it (as for a reader going down the page); variables it exports are
  not. ``PATH`` starts with the virtual environment's ``bin`` (its ``fme-ai-resilience``), no
  ``FAIR_*`` variable is set and ``HOME`` is the temporary directory. In a ``console`` block
  the lines starting with ``$ `` are the commands and the other lines their output.
* A block must exit 0. When a ``text`` or ``json`` block follows it (only blank lines between),
  that is what the block prints, stdout and stderr together, exactly (trailing spaces aside;
  the temporary directory is shown as ``$PWD``).
* An HTML comment on the line before the fence changes that, and must give a reason where it
  skips something, so nothing is left out silently:

  - ``<!-- snippet: skip (reason) -->`` the block is not run (it installs packages, needs a
    PostgreSQL server or a remote service...);
  - ``<!-- snippet: exit N -->`` the block must exit N (a refused configuration, say);
  - ``<!-- snippet: server -->`` the block's last command is a server: it must print its
    ``http://127.0.0.1:PORT`` address and answer ``GET /healthz`` there with 200, and is then
    stopped;
  - ``<!-- snippet: run -->`` before a ``python`` block: it runs too, in its place in the
    sequence, with the environment's Python (a block the shell snippets after it build on).
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pytest

from helpers import REPO


ROOT = REPO
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = ("sh", "shell", "bash", "console")
OUTPUTS = ("text", "json")
BIN = Path(sys.executable).parent
MARKER = re.compile(r"^<!--\s*snippet:\s*(?P<kind>\w+)\s*(?P<arg>.*?)\s*-->$")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\s*$")
#: Long enough for any snippet; only a hung one ever reaches it.
SAFETY_TIMEOUT_S = 120


@dataclass
class Block:
    """One fenced block of a document."""

    document: Path
    line: int
    lang: str
    body: str
    marker: Optional[str] = None
    marker_arg: str = ""
    output: Optional[str] = None   # the text/json block right after it, if any
    end: int = 0                   # the index of the line after its closing fence

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def blocks(document: Path) -> List[Block]:
    """The fenced blocks of ``document``, each with its marker and the output shown after it."""
    lines = document.read_text(encoding="utf-8").splitlines()
    found: List[Block] = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        block = Block(document, start + 1, fence.group("lang"), "\n".join(body) + "\n",
                      end=i + 1)
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.match(lines[before].strip()) if before >= 0 else None
        if marker:
            block.marker, block.marker_arg = marker.group("kind"), marker.group("arg")
        if found and found[-1].lang in SHELLS + ("python",) and block.lang in OUTPUTS and \
                all(not line.strip() for line in lines[found[-1].end:start]):
            found[-1].output = block.body
        found.append(block)
        i += 1
    return found


def _runs(block: Block) -> bool:
    return (block.lang in SHELLS and block.marker != "skip") or (
        block.lang == "python" and block.marker == "run")


def _environment(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FAIR_", "PG", "VIRTUAL_ENV", "PYTHON"))}
    env.update(PATH=f"{BIN}{os.pathsep}/usr/bin{os.pathsep}/bin", HOME=str(home))
    return env


def _normalised(text: str, cwd: Optional[Path] = None) -> str:
    """``text`` without trailing spaces; the temporary directory the blocks run in is written
    ``$PWD`` (the ledger line names a SQLite file by its absolute path)."""
    if cwd is not None:
        text = text.replace(str(cwd), "$PWD")
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _script(block: Block) -> List[str]:
    if block.lang == "python":
        return [sys.executable, "-c", block.body]
    body = block.body
    if block.lang == "console":
        body = "\n".join(line[2:] for line in body.splitlines() if line.startswith("$ "))
    return ["bash", "-e", "-c", body]


def _expected(block: Block) -> Optional[str]:
    if block.lang == "console":
        shown = [line for line in block.body.splitlines() if not line.startswith("$ ")]
        return "\n".join(shown) if any(line.strip() for line in shown) else None
    return block.output


def _run(block: Block, cwd: Path) -> None:
    done = subprocess.run(_script(block), cwd=cwd, env=_environment(cwd), text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=SAFETY_TIMEOUT_S)
    wanted = int(block.marker_arg) if block.marker == "exit" else 0
    assert done.returncode == wanted, (
        f"{block.where}: exit {done.returncode}, expected {wanted}:\n{done.stdout}")
    expected = _expected(block)
    if expected is not None:
        assert _normalised(done.stdout, cwd) == _normalised(expected), (
            f"{block.where} printed:\n{done.stdout}\nbut the document shows:\n{expected}")


def _serve(block: Block, cwd: Path) -> None:
    """Start the server block, ask its /healthz on loopback, stop it."""
    proc = subprocess.Popen(_script(block), cwd=cwd, env=_environment(cwd), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    lines: "queue.Queue[Optional[str]]" = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen = []
    try:
        while True:
            try:
                line = lines.get(timeout=SAFETY_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"{block.where}: the server printed no address:\n{''.join(seen)}")
            if line is None:
                pytest.fail(f"{block.where}: the server stopped (exit {proc.wait()}):\n"
                            f"{''.join(seen)}")
            seen.append(line)
            address = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if address and int(address.group(1)):
                break
        url = f"http://127.0.0.1:{address.group(1)}/healthz"
        with urllib.request.urlopen(url, timeout=30) as answer:
            assert answer.status == 200, f"{block.where}: {url} answered {answer.status}"
    finally:
        # SIGTERM, not Ctrl-C's SIGINT: wsgiref swallows a KeyboardInterrupt that lands while
        # it still writes an answer, and the server would go on serving.
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=SAFETY_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def test_the_installed_command_is_the_one_snippets_run():
    """The snippets run the environment's own fme-ai-resilience, not one found elsewhere."""
    assert (BIN / "fme-ai-resilience").exists()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_marker_is_known_and_every_skip_says_why(document):
    """A snippet marker is one of skip (with a reason), exit N, server or run, on a block it
    applies to: a misspelt marker cannot skip a block silently."""
    for block in blocks(document):
        if block.marker is None:
            continue
        assert block.marker in ("skip", "exit", "server", "run"), f"{block.where}: {block.marker}"
        if block.marker == "skip":
            assert re.fullmatch(r"\(.{8,}\)", block.marker_arg), (
                f"{block.where}: a skip needs a reason in parentheses")
        elif block.marker == "exit":
            assert block.marker_arg.isdigit(), f"{block.where}: exit needs a number"
        elif block.marker == "run":
            assert block.lang == "python", f"{block.where}: run is for python blocks"
        if block.marker in ("skip", "exit", "server"):
            assert block.lang in SHELLS, f"{block.where}: {block.marker} is for shell blocks"
    text = document.read_text(encoding="utf-8")
    assert len(re.findall(r"^<!--\s*snippet:", text, flags=re.M)) == sum(
        1 for b in blocks(document) if b.marker), f"{document.name}: a marker not before a block"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_shell_snippet_runs_as_shown(document, tmp_path):
    """Each document's shell snippets run in order and print what the document shows."""
    for block in blocks(document):
        if not _runs(block):
            continue
        if block.marker == "server":
            _serve(block, tmp_path)
        else:
            _run(block, tmp_path)


def test_the_snippet_harness_can_fail(tmp_path):
    """A snippet that exits 1, or prints other than shown, fails the check (it is no rubber stamp)."""
    page = tmp_path / "page.md"
    page.write_text("```sh\necho hello\n```\n\n```text\nhello\n```\n\n"
                    "```sh\necho other\n```\n\n```text\nhello\n```\n\n"
                    "<!-- snippet: exit 3 -->\n```sh\nexit 1\n```\n", encoding="utf-8")
    first, _, second, _, third = blocks(page)
    for block in (first, second, third):
        block.document = ROOT / "page.md"   # for the message only
    _run(first, tmp_path)
    for bad in (second, third):
        with pytest.raises(AssertionError):
            _run(bad, tmp_path)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_powershell_snippets_use_only_what_windows_powershell_accepts(document):
    """PowerShell cannot be run here, so its known refusals are checked: Expand-Archive takes
    only a .zip file, and a native command is given full paths (.FullName), not FileInfo
    objects that Windows PowerShell 5.1 may turn into bare names."""
    for block in blocks(document):
        if block.lang != "powershell":
            continue
        for archive in re.findall(r"^\s*Expand-Archive\s+(?:-Path\s+)?(\S+)", block.body,
                                  re.MULTILINE):
            assert archive.lower().endswith(".zip"), f"{document.name}:{block.line}: {archive}"
        for listing in re.findall(r"\(Get-ChildItem [^)]*\)(\.\w+)?", block.body):
            assert listing == ".FullName", f"{document.name}:{block.line}: Get-ChildItem"
