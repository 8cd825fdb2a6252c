"""The import rules of shared/DESIGN.md section 2, checked on the source.

Layers, in order: core (pure), store (the only SQL), services (I/O through injected clients),
adapters (the edges). A module imports only from its own layer or the layers before it;
nothing imports an adapter; the core imports no module that does I/O or reads the clock.
Imports under ``if TYPE_CHECKING:`` are annotations only and do not count.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fme_ai_resilience"
NAME = PACKAGE.name

CORE = {"errors", "clock", "settings", "backoff", "retry", "retry_budget", "budget", "keys",
        "survey123", "validate", "breaker", "degrade", "calibrate", "redact", "ledger",
        "submission", "recent_bodies"}
SERVICES = {"vision", "arcgis", "flow", "intake", "processor", "compensator", "observe",
            "live_settings"}
ADAPTERS = {"fme", "gateway", "cli", "drill", "testing", "__main__"}
RANK = {"core": 0, "store": 1, "services": 2, "adapters": 3}

#: Standard-library and third-party modules that talk to the world or read the time.
IO_MODULES = {"time", "socket", "select", "sqlite3", "psycopg2", "http", "urllib.request",
              "subprocess", "threading", "multiprocessing", "requests", "urllib3", "wsgiref",
              "shutil", "tempfile", "logging.handlers"}
#: Exception classes only: the retry engine classifies what HTTP libraries raise.
IO_EXCEPTIONS_ALLOWED = {"requests.exceptions", "urllib3.exceptions"}
#: The clock is where the time is read, on purpose.
CLOCK_READERS = {"clock": {"time"}}
#: The parse memo guards its table with a ``threading.Lock`` (the gateway may serve on several
#: threads); it starts no thread and does no I/O.
LOCK_USERS = {"recent_bodies": {"threading"}}


def layer_of(module: str) -> str:
    """The layer of a dotted module name inside the package."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if top == "__init__" or top in CORE:
        return "core"
    if top == "store":
        return "store"
    if top in SERVICES:
        return "services"
    if top in ADAPTERS:
        return "adapters"
    raise AssertionError(f"{module}: no layer assigned; add it to tests/test_layering.py")


def modules() -> Iterator[Path]:
    return iter(sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Set[str]:
    """Absolute names imported at run time by the module at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    annotation_only: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            annotation_only.update(id(n) for n in ast.walk(node))
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: Set[str] = set()
    for node in ast.walk(tree):
        if id(node) in annotation_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:
                    found.update(f"{target}.{alias.name}" for alias in node.names)
                else:
                    found.add(target)
            elif node.module != "__future__":
                found.add(node.module)
    return found


def _internal(name: str) -> bool:
    return name == NAME or name.startswith(NAME + ".")


def _is_io(name: str) -> bool:
    if name in IO_EXCEPTIONS_ALLOWED:
        return False
    return any(name == m or name.startswith(m + ".") for m in IO_MODULES)


GRAPH: Dict[str, Set[str]] = {module_name(p): imports_of(p) for p in modules()}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_module_imports_only_its_own_layer_or_the_ones_before(module):
    """Core never imports the store, services or adapters; nothing imports an adapter."""
    own = layer_of(module)
    for name in GRAPH[module]:
        if not _internal(name) or name == NAME or name.startswith(f"{NAME}.__version__"):
            continue
        other = layer_of(name)
        if other == "adapters":
            assert own == "adapters", f"{module} imports the adapter {name}"
        assert RANK[other] <= RANK[own], f"{module} ({own}) imports {name} ({other})"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if layer_of(m) == "core"))
def test_core_does_no_io_and_reads_no_clock(module):
    """The pure core imports nothing that talks to the network, disk, processes or the time."""
    short = module.split(".")[-1]
    allowed = CLOCK_READERS.get(short, set()) | LOCK_USERS.get(short, set())
    offending = {n for n in GRAPH[module] if not _internal(n) and _is_io(n) and n not in allowed}
    assert not offending, f"{module} imports {sorted(offending)}"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if layer_of(m) != "store"))
def test_database_drivers_only_in_the_store(module):
    """SQL lives only in the store: no other module imports a database driver."""
    drivers = {n for n in GRAPH[module] if n.split(".")[0] in ("sqlite3", "psycopg2", "psycopg")}
    assert not drivers, f"{module} imports {sorted(drivers)}"


def test_the_checker_sees_a_violation():
    """The import scanner finds relative imports, so a breach cannot hide behind dots."""
    found = imports_of(PACKAGE / "intake.py")
    assert f"{NAME}.store.base" in found and f"{NAME}.survey123" in found
