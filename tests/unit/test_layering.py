"""The import rules of docs/architecture.md, proved on the source against its folder table.

docs/architecture.md holds one table, folder -> layer (core, store, services, adapters): the
layer of a module is the row of its folder. Every check reads the layers from it, so the map
and the code cannot drift. Each check is a plain
function ``check_*(root, architecture) -> List[str]`` of the package directory and the map,
returning violations as ``path:line: what``; the tests run them on the real package and expect
nothing, and the meta-tests at the end run them on a copy with one violation planted and expect
it to be reported, so no check can pass vacuously.
"""
from __future__ import annotations

import ast
import configparser
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

import pytest

from helpers import REPO


PACKAGE = REPO / "fme_ai_resilience"
ARCHITECTURE = REPO / "docs" / "architecture.md"
NAME = "fme_ai_resilience"

LAYERS = ("core", "store", "services", "adapters")
RANK = {layer: rank for rank, layer in enumerate(LAYERS)}
#: The facade: core, its re-exports loaded lazily inside ``__getattr__``.
FACADES = frozenset({NAME})
MAP_HEADER = ["folder", "layer", "what it holds"]
#: The folders grouped by capability, and the pure layer whose capabilities the other follows.
CORE = f"{NAME}.core"
SERVICES = f"{NAME}.services"

#: What the pure core may import: the standard-library modules it uses today, plus ``abc``.
#: Adding one is a deliberate one-line change here, never a side effect.
CORE_STDLIB = frozenset({
    "__future__", "abc", "base64", "binascii", "collections", "collections.abc",
    "dataclasses", "datetime", "difflib", "email.utils", "enum", "functools", "hashlib", "hmac",
    "json", "math", "random", "re", "types", "typing", "urllib.parse", "xml.etree.ElementTree", "zlib",
})
#: A pure validator: no I/O (the core never hands it a remote ``$ref`` resolver).
CORE_THIRD_PARTY = frozenset({"jsonschema"})
#: More that one core module may import, and why.
CORE_EXTRA = {
    f"{NAME}.core.clock": frozenset({"time"}),  # it is the clock
    **{facade: frozenset({"importlib"}) for facade in FACADES},  # the lazy re-exports
}
DRIVERS = frozenset({"sqlite3", "psycopg2", "psycopg", "pg8000", "asyncpg", "aiosqlite"})
#: Parameter names and annotation type names that mean "holds a store, session or socket".
HELD_NAMES = frozenset({"store", "session", "sock", "socket", "conn", "connection"})
HELD_TYPES = frozenset({"Store", "SqlStore", "Session", "socket"})
#: A statement inside a Python string (docstrings excepted): SQL belongs to the store.
SQL_TEXT = re.compile(
    r"^\s*(SELECT\b[\s\S]*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM"
    r"|CREATE\s+(TABLE|INDEX|UNIQUE)|ALTER\s+TABLE|DROP\s+TABLE|BEGIN\s+IMMEDIATE)\b",
    re.IGNORECASE)

#: What a core module may not touch, by category; a dotted name matches a prefix at a dot.
FORBIDDEN = {
    "reads the clock": ("time", "datetime.datetime.now", "datetime.datetime.utcnow",
                        "datetime.datetime.today", "datetime.date.today",
                        f"{NAME}.core.clock.SystemClock"),
    "reads the environment": ("os.environ", "os.environb", "os.getenv", "os.getenvb",
                              "os.putenv", "os.unsetenv"),
    "draws randomness": ("os.urandom", "secrets"),  # ``random.*`` is handled on its own
    "makes a uuid": ("uuid",),
    "touches files": ("builtins.open", "io.open", "io.FileIO", "os.open", "os.fdopen",
                      "codecs.open", "pathlib", "shutil", "tempfile"),
    "opens a socket": ("socket", "ssl", "select", "selectors"),
    "runs a process": ("subprocess", "os.system", "os.popen"),
}
#: Methods that read or write a file whatever they are called on (``Path(p).read_text()``).
FILE_METHODS = frozenset({"read_text", "read_bytes", "write_text", "write_bytes", "open"})
#: Methods that read the clock whatever they are called on (``date.today()`` on an instance).
CLOCK_METHODS = frozenset({"utcnow", "today"})
#: What ``clock`` may do that the rest of the core may not.
CORE_PRIVILEGES = {f"{NAME}.core.clock": frozenset({"reads the clock"})}


# --- the package as source -------------------------------------------------------------------

@dataclass(frozen=True)
class Module:
    """One ``.py`` file of the package, parsed."""

    name: str
    path: Path
    is_package: bool
    tree: ast.Module
    source: str


@dataclass(frozen=True)
class Import:
    """One module imported by a module; ``names`` are those taken from it (``from m import a``)."""

    module: str
    names: Tuple[str, ...]
    line: int
    annotation_only: bool  # under ``if TYPE_CHECKING:``
    lazy: bool             # inside the facade's module-level ``__getattr__``
    local: Optional[str] = None  # the local name a module is bound to, if any


@dataclass(frozen=True)
class Package:
    """The package's modules, its ``.sql`` files and the map's layers."""

    root: Path
    modules: Dict[str, Module]
    sql_files: Tuple[Tuple[str, Path], ...]  # (dotted name of the directory, file)
    rules: Dict[str, str]     # folder (dotted, ``/`` at the end) or file (dotted) -> layer
    map_rows: Dict[str, int]  # rule -> line of its row in the map
    map_problems: Tuple[str, ...]
    layers: Dict[str, str]    # module -> the layer of its folder's row
    _imports: Dict[str, List["Import"]] = field(default_factory=dict, repr=False)

    def where(self, module: str, line: int) -> str:
        return f"{_rel(self.root, self.modules[module].path)}:{line}"

    def imports(self, module: str) -> List["Import"]:
        """What ``module`` imports (see :func:`imports_of`), computed once."""
        if module not in self._imports:
            self._imports[module] = imports_of(self, self.modules[module])
        return self._imports[module]


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root.parent).as_posix()
    except ValueError:
        return path.as_posix()


def _subdirs(base: Path) -> List[Path]:
    return sorted(p for p in base.rglob("*") if p.is_dir() and "__pycache__" not in p.parts)


def package_dirs(root: Path) -> Dict[str, Path]:
    """The package's directories by dotted name: the tree plus setup.cfg's ``package_dir``."""
    dirs = {NAME: root}
    for sub in _subdirs(root):
        dirs[".".join((NAME,) + sub.relative_to(root).parts)] = sub
    setup_cfg = root.parent / "setup.cfg"
    if setup_cfg.is_file():
        config = configparser.ConfigParser()
        config.read(setup_cfg, encoding="utf-8")
        for line in config.get("options", "package_dir", fallback="").splitlines():
            dotted, _, directory = (part.strip() for part in line.partition("="))
            if dotted.startswith(NAME + ".") and directory:
                base = root.parent / directory
                dirs[dotted] = base
                for sub in _subdirs(base):
                    dirs[".".join([dotted, *sub.relative_to(base).parts])] = sub
    return dirs


def _stamp(path: Path) -> Tuple[str, int, int]:
    stat = path.stat()
    return str(path), stat.st_mtime_ns, stat.st_size


#: The last packages loaded, by the stamps of their files: the checks share one load of a tree.
_LOADED: Dict[Tuple[Tuple[str, int, int], ...], "Package"] = {}
#: Syntax trees by source text, so a copy of the package re-parses only the file planted in it.
_TREES: Dict[str, ast.Module] = {}


def _tree(source: str, path: Path) -> ast.Module:
    if source not in _TREES:
        _TREES[source] = ast.parse(source, str(path))
    return _TREES[source]


#: Every node of each tree, in ``ast.walk`` order, by the tree's id (trees live in ``_TREES``).
_NODES: Dict[int, List[ast.AST]] = {}


def _walk(tree: ast.Module) -> List[ast.AST]:
    """``list(ast.walk(tree))``, computed once per tree: the checks walk every module, and the
    meta-tests' copies share every tree but the planted one's."""
    if id(tree) not in _NODES:
        _NODES[id(tree)] = list(ast.walk(tree))
    return _NODES[id(tree)]


def read_map(architecture: Path, where: str) -> Tuple[Dict[str, str], Dict[str, int], List[str]]:
    """The ``| folder | layer | what it holds |`` table: rules, row lines and what is wrong.

    A rule is a folder of the package (```fme_ai_resilience/core/```, every module below it) or
    one file (```fme_ai_resilience/__main__.py```), kept as a dotted name (a folder's with a
    trailing ``/``). ``where`` names the page in the messages.
    """
    if not architecture.is_file():
        return {}, {}, [f"{where}: the map of the package is missing"]
    lines = architecture.read_text(encoding="utf-8").splitlines()

    def cells(line: str) -> List[str]:
        return [cell.strip() for cell in line.strip().strip("|").split("|")]

    headers = [i for i, line in enumerate(lines)
               if line.lstrip().startswith("|") and [c.lower() for c in cells(line)] == MAP_HEADER]
    if len(headers) != 1:
        return {}, {}, [f"{where}: {len(headers)} tables with the columns "
                        f"| folder | layer | what it holds |, expected exactly one"]
    rules: Dict[str, str] = {}
    rows: Dict[str, int] = {}
    problems: List[str] = []
    start = headers[0] + 1
    if start >= len(lines) or not re.fullmatch(r"\s*\|(\s*:?-{3,}:?\s*\|){3}\s*", lines[start]):
        problems.append(f"{where}:{start + 1}: the map's header is not followed by |---|---|---|")
    for number in range(start + 1, len(lines)):
        line = lines[number]
        if not line.lstrip().startswith("|"):
            break
        row = cells(line)
        at = f"{where}:{number + 1}"
        if len(row) != 3:
            problems.append(f"{at}: a map row needs 3 cells, has {len(row)}")
            continue
        place, layer, purpose = row
        folder = re.fullmatch(rf"`({NAME}(?:/\w+)*)/`", place)
        file = re.fullmatch(rf"`({NAME}(?:/\w+)*)\.py`", place)
        if folder:
            rule = folder.group(1).replace("/", ".") + "/"
        elif file:
            rule = file.group(1).replace("/", ".")
            rule = rule[: -len(".__init__")] if rule.endswith(".__init__") else rule
        else:
            problems.append(f"{at}: {place!r} is not a folder (`{NAME}/x/`) or a file "
                            f"(`{NAME}/x.py`) of the package in backticks")
            continue
        if layer not in RANK:
            problems.append(f"{at}: {place} has layer {layer!r}, not one of {', '.join(LAYERS)}")
            continue
        if not purpose:
            problems.append(f"{at}: {place} says nothing of what it holds")
        if rule in rules:
            problems.append(f"{at}: {place} is listed twice")
            continue
        rules[rule] = layer
        rows[rule] = number + 1
    return rules, rows, problems


def rule_of(module: str, rules: Dict[str, str]) -> Optional[str]:
    """The rule that gives ``module`` its layer: its own file's, else its nearest folder's."""
    if module in rules:
        return module
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        folder = ".".join(parts[:end]) + "/"
        if folder in rules:
            return folder
    return None


def shown(rule: str) -> str:
    """A rule as the map writes it."""
    return rule.replace(".", "/") if rule.endswith("/") else rule.replace(".", "/") + ".py"


def load(root: Path, architecture: Path) -> Package:
    """Parse every module of the package at ``root`` and read the map."""
    files = [(dotted, path) for dotted, directory in package_dirs(root).items()
             for path in sorted(directory.iterdir())
             if path.suffix in (".py", ".sql") and path.is_file()]
    key = tuple(_stamp(path) for _, path in files)
    key += (_stamp(architecture),) if architecture.is_file() else ()
    if key in _LOADED:
        return _LOADED[key]
    modules: Dict[str, Module] = {}
    for dotted, path in files:
        # A .py file whose name is no identifier cannot be imported: it is data the package
        # ships (the workspace templates' PythonCaller scripts), not one of its modules.
        if path.suffix == ".py" and (path.stem == "__init__" or path.stem.isidentifier()):
            is_package = path.stem == "__init__"
            name = dotted if is_package else f"{dotted}.{path.stem}"
            source = path.read_text(encoding="utf-8")
            modules[name] = Module(name, path, is_package, _tree(source, path), source)
    rules, rows, problems = read_map(architecture, _rel(root, architecture))
    layers = {name: rules[rule] for name in modules
              for rule in [rule_of(name, rules)] if rule is not None}
    sql_files = tuple((dotted, path) for dotted, path in files if path.suffix == ".sql")
    package = Package(root, modules, sql_files, rules, rows, tuple(problems), layers)
    while len(_LOADED) >= 4:
        del _LOADED[next(iter(_LOADED))]
    _LOADED[key] = package
    return package


def _is_type_checking(test: ast.expr) -> bool:
    return ((isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
            or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _nodes(module: Module) -> Iterator[Tuple[ast.AST, bool, bool]]:
    """The module's statements (every node, where a dynamic import may hide) with
    (annotation_only, lazy)."""
    facade = module.name in FACADES
    dynamic = "import_module" in module.source or "__import__" in module.source
    stack: List[Tuple[ast.AST, bool, bool]] = [(module.tree, False, False)]
    while stack:
        node, annotation_only, lazy = stack.pop()
        yield node, annotation_only, lazy
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            children = ([(child, True, lazy) for child in node.body]
                        + [(child, annotation_only, lazy) for child in node.orelse])
        elif node is module.tree:
            children = [(child, False, facade and isinstance(child, ast.FunctionDef)
                         and child.name == "__getattr__") for child in module.tree.body]
        elif dynamic:
            children = [(child, annotation_only, lazy) for child in ast.iter_child_nodes(node)]
        else:  # an import statement sits only in a body of statements
            blocks = [getattr(node, name, None) or [] for name in ("body", "orelse", "finalbody")]
            blocks += [handler.body for handler in getattr(node, "handlers", None) or []]
            blocks += [case.body for case in getattr(node, "cases", None) or []]
            children = [(child, annotation_only, lazy) for block in blocks
                        if isinstance(block, list) for child in block]
        stack.extend(reversed(children))


def _literal_import(node: ast.AST) -> Optional[str]:
    """The module named by ``importlib.import_module("x")`` or ``__import__("x")``, if literal."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return node.args[0].value if called in ("import_module", "__import__") else None


def imports_of(package: Package, module: Module) -> List[Import]:
    """Every import the module makes, relative ones resolved to absolute names.

    ``from p import name`` where ``p.name`` is a module of the package counts as importing
    ``p.name``; any other name counts as importing ``p`` itself (a package means its
    ``__init__``).
    """
    own = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    found: List[Import] = []
    for node, annotation_only, lazy in _nodes(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(alias.name, (), node.lineno, annotation_only, lazy,
                                    alias.asname))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level > len(own):
                    raise SyntaxError(f"{package.where(module.name, node.lineno)}: relative "
                                      f"import beyond the top-level package")
                base = own[:len(own) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            taken = tuple(a.name for a in node.names if f"{source}.{a.name}" not in package.modules)
            for alias in node.names:
                if f"{source}.{alias.name}" in package.modules:
                    found.append(Import(f"{source}.{alias.name}", (), node.lineno,
                                        annotation_only, lazy, alias.asname or alias.name))
            if taken:
                found.append(Import(source, taken, node.lineno, annotation_only, lazy))
        else:
            literal = _literal_import(node)
            if literal is not None:
                found.append(Import(literal, (), getattr(node, "lineno", 1), annotation_only,
                                    lazy))
    return found


def _internal(name: str) -> bool:
    return name == NAME or name.startswith(NAME + ".")


def _matches(dotted: str, prefix: str) -> bool:
    return dotted == prefix or dotted.startswith(prefix + ".")


def _mapped(package: Package) -> Iterator[Tuple[Module, str]]:
    for name in sorted(package.modules):
        if name in package.layers:
            yield package.modules[name], package.layers[name]


# --- the checks --------------------------------------------------------------------------------

def check_map(root: Path, architecture: Path) -> List[str]:
    """Every module's folder is on the map, each top-level folder has a row of its own, and the
    map lists no folder or file that holds no module."""
    package = load(root, architecture)
    doc = _rel(root, architecture)
    found = list(package.map_problems)
    for name in sorted(package.modules):
        if name not in package.layers:
            found.append(f"{package.where(name, 1)}: {name} is not in the map ({doc}): no row "
                         f"for its folder")
            continue
        top = ".".join(name.split(".")[:2])
        if name != NAME and package.modules[name].path.parent != root \
                and rule_of(name, package.rules) == NAME + "/":
            found.append(f"{package.where(name, 1)}: {top} has no row of its own in the map "
                         f"({doc})")
    for rule in sorted(package.rules):
        if not any(rule_of(name, package.rules) == rule for name in package.modules):
            found.append(f"{doc}:{package.map_rows[rule]}: the map lists {shown(rule)}, which "
                         f"holds no module of the package")
    return found


def check_twins(root: Path, architecture: Path) -> List[str]:
    """A concept's I/O half sits in the capability folder of its pure half (same stem)."""
    package = load(root, architecture)
    pure: Dict[str, str] = {}
    for name, module in package.modules.items():
        parts = name.split(".")
        if _matches(name, CORE) and len(parts) == 4 and not module.is_package:
            pure[parts[3]] = parts[2]
    found = []
    for name, module in sorted(package.modules.items()):
        parts = name.split(".")
        if not (_matches(name, SERVICES) and len(parts) == 4 and not module.is_package):
            continue
        capability, stem = parts[2], parts[3]
        if stem in pure and pure[stem] != capability:
            found.append(f"{package.where(name, 1)}: {name} is the twin of "
                         f"{CORE}.{pure[stem]}.{stem}: it belongs in services/{pure[stem]}/")
    return found


def check_import_direction(root: Path, architecture: Path) -> List[str]:
    """Each module imports its own layer or the ones before it; only adapters import adapters."""
    package = load(root, architecture)
    found: List[str] = []
    for module, layer in _mapped(package):
        hint = (" (the facade re-exports lazily, inside __getattr__)" if module.name in FACADES
                else "")
        for imp in package.imports(module.name):
            if not _internal(imp.module) or imp.annotation_only or imp.lazy:
                continue
            at = package.where(module.name, imp.line)
            if imp.module not in package.modules:
                found.append(f"{at}: {module.name} imports {imp.module}, which is not a module of "
                             f"the package")
                continue
            if imp.module == NAME and layer != "adapters":
                through = [n for n in imp.names if not (n.startswith("__") and n.endswith("__"))]
                if through:
                    found.append(f"{at}: {module.name} ({layer}) takes {', '.join(through)} "
                                 f"through the facade; import it from the module that holds it")
                    continue
            other = package.layers.get(imp.module)
            if other is None:
                continue  # unmapped: check_map reports it
            if other == "adapters" and layer != "adapters":
                found.append(f"{at}: {module.name} ({layer}) imports the adapter {imp.module}; "
                             f"nothing but an adapter imports an adapter{hint}")
            elif RANK[other] > RANK[layer]:
                found.append(f"{at}: {module.name} ({layer}) imports {imp.module} ({other}), a "
                             f"later layer{hint}")
    return found


def check_core_imports(root: Path, architecture: Path) -> List[str]:
    """The core imports only allowlisted standard-library modules, ``jsonschema`` and the core."""
    package = load(root, architecture)
    found: List[str] = []
    for module, layer in _mapped(package):
        if layer != "core":
            continue
        allowed = CORE_STDLIB | CORE_THIRD_PARTY | CORE_EXTRA.get(module.name, frozenset())
        for imp in package.imports(module.name):
            if imp.annotation_only or _internal(imp.module):
                continue
            if imp.module in allowed or any(f"{imp.module}.{n}" in allowed for n in imp.names):
                continue
            found.append(f"{package.where(module.name, imp.line)}: core module {module.name} "
                         f"imports {imp.module}, which is not on the core's allowlist")
    return found


def _aliases(module: Module) -> Dict[str, str]:
    """Local name -> the dotted name an import binds it to, in any scope."""
    own = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    bound: Dict[str, str] = {}
    for node in _walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    bound[top] = top
        elif isinstance(node, ast.ImportFrom) and 0 < node.level <= len(own):
            base = own[:len(own) - (node.level - 1)] + ([node.module] if node.module else [])
            for alias in node.names:
                bound[alias.asname or alias.name] = ".".join(base + [alias.name])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _dotted(node: ast.AST, aliases: Dict[str, str]) -> Optional[str]:
    """``t.monotonic`` -> ``time.monotonic`` through the import aliases; None if not imported."""
    parts: List[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    if node.id in aliases:
        root = aliases[node.id]
    elif node.id == "open" and not parts:
        root = "builtins.open"
    else:
        return None
    return ".".join([root, *reversed(parts)])


def check_core_effects(root: Path, architecture: Path) -> List[str]:
    """No core code reads the clock (but ``clock``), the environment, randomness, files, sockets."""
    package = load(root, architecture)
    found: List[str] = []
    for module, layer in _mapped(package):
        if layer != "core":
            continue
        privileges = CORE_PRIVILEGES.get(module.name, frozenset())
        aliases = _aliases(module)
        nodes = _walk(module.tree)
        inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}

        def refuse(node: ast.AST, what: str, category: str) -> None:
            if category not in privileges:
                found.append(f"{package.where(module.name, getattr(node, 'lineno', 1))}: core "
                             f"module {module.name} {category}: {what}")

        for node in nodes:
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and _dotted(node.func, aliases) is None):
                if node.func.attr in FILE_METHODS:
                    refuse(node, f".{node.func.attr}(...)", "touches files")
                elif node.func.attr in CLOCK_METHODS:
                    refuse(node, f".{node.func.attr}()", "reads the clock")
            if not isinstance(node, (ast.Name, ast.Attribute)) or id(node) in inner:
                continue
            dotted = _dotted(node, aliases)
            if dotted is None:
                continue
            if _matches(dotted, "random"):
                if dotted == "random.Random" and id(node) in called:
                    refuse(node, "random.Random(...) (a core function is handed one)",
                           "draws randomness")
                elif not _matches(dotted, "random.Random"):
                    refuse(node, f"{dotted} (use the injected random.Random)", "draws randomness")
                continue
            for category, prefixes in FORBIDDEN.items():
                if any(_matches(dotted, prefix) for prefix in prefixes):
                    refuse(node, dotted, category)
                    break
    return found


def _type_names(annotation: Optional[ast.AST]) -> Set[str]:
    """Every type name an annotation mentions, inside subscripts and quoted forward references."""
    names: Set[str] = set()
    for node in ast.walk(annotation) if annotation is not None else ():
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                names |= _type_names(ast.parse(node.value, mode="eval"))
            except SyntaxError:
                pass
    return names


def check_core_parameters(root: Path, architecture: Path) -> List[str]:
    """No core function, method or dataclass field receives a store, session, socket, connection."""
    package = load(root, architecture)
    found: List[str] = []
    for module, layer in _mapped(package):
        if layer != "core":
            continue
        held: List[Tuple[int, str, Optional[ast.AST], str]] = []
        for node in _walk(module.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                owner = f"{getattr(node, 'name', 'lambda')}()"
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs,
                            *[a for a in (args.vararg, args.kwarg) if a is not None]]:
                    held.append((arg.lineno, arg.arg, arg.annotation, owner))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        held.append((item.lineno, item.target.id, item.annotation, node.name))
        for line, name, annotation, owner in held:
            types = _type_names(annotation) & HELD_TYPES
            if name in HELD_NAMES or types:
                what = f"parameter {name!r}" + (f" of type {sorted(types)[0]}" if types else "")
                found.append(f"{package.where(module.name, line)}: core module {module.name}: "
                             f"{owner} receives {what}; what holds a store, session or socket is "
                             f"a service")
    return found


def check_no_cycles(root: Path, architecture: Path) -> List[str]:
    """The run-time import graph between the package's modules has no cycle."""
    package = load(root, architecture)
    edges: Dict[str, Dict[str, int]] = {name: {} for name in package.modules}
    for name in sorted(package.modules):
        for imp in package.imports(name):
            if (imp.module in package.modules and imp.module != name
                    and not imp.annotation_only and not imp.lazy):
                edges[name].setdefault(imp.module, imp.line)
    # Tarjan's strongly connected components
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    components: List[List[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    found = []
    for component in components:
        members = set(component)
        start = component[0]
        paths = {start: [start]}
        queue = [start]
        cycle: List[str] = []
        while queue and not cycle:  # the shortest way from start back to itself
            node = queue.pop(0)
            for succ in sorted(edges[node]):
                if succ == start:
                    cycle = paths[node] + [start]
                    break
                if succ in members and succ not in paths:
                    paths[succ] = paths[node] + [succ]
                    queue.append(succ)
        steps = " -> ".join(f"{a} ({package.where(a, edges[a][b])})"
                            for a, b in zip(cycle, cycle[1:]))
        found.append(f"import cycle: {steps} -> {start}")
    return found


def check_sql_in_store(root: Path, architecture: Path) -> List[str]:
    """Database drivers, ``.sql`` files and SQL statements appear only in the store."""
    package = load(root, architecture)
    found: List[str] = []
    for dotted, path in package.sql_files:
        if not _matches(dotted, f"{NAME}.store"):
            found.append(f"{_rel(root, path)}: SQL file outside the store ({dotted})")
    for module, layer in _mapped(package):
        if layer == "store":
            continue
        for imp in package.imports(module.name):
            if imp.module.split(".")[0] in DRIVERS:
                found.append(f"{package.where(module.name, imp.line)}: {module.name} ({layer}) "
                             f"imports the database driver {imp.module}")
        nodes = _walk(module.tree)
        docstrings = {id(n.body[0].value) for n in nodes
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                        ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in nodes:
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docstrings and SQL_TEXT.search(node.value)):
                found.append(f"{package.where(module.name, node.lineno)}: {module.name} ({layer}) "
                             f"holds SQL text {node.value.strip()[:40]!r}")
    return found


def _private(segment: str) -> bool:
    """A leading underscore makes a name private; dunders (``__version__``) are public."""
    return segment.startswith("_") and not (segment.endswith("__") and len(segment) > 4)


def check_adapters_use_public_names(root: Path, architecture: Path) -> List[str]:
    """An adapter takes from the package only public names of public modules."""
    package = load(root, architecture)
    found: List[str] = []
    for module, layer in _mapped(package):
        if layer != "adapters":
            continue
        bound: Dict[str, str] = {}  # local name -> package module, for ``mod._name``
        for imp in package.imports(module.name):
            if not _internal(imp.module):
                continue
            if imp.local:
                bound[imp.local] = imp.module
            at = package.where(module.name, imp.line)
            if any(_private(segment) for segment in imp.module.split(".")[1:]):
                found.append(f"{at}: adapter {module.name} imports from the private module "
                             f"{imp.module}")
            for name in imp.names:
                if _private(name):
                    found.append(f"{at}: adapter {module.name} imports the private name {name} "
                                 f"from {imp.module}")
        for node in _walk(module.tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and _private(node.attr)):
                found.append(f"{package.where(module.name, node.lineno)}: adapter {module.name} "
                             f"uses the private name {node.value.id}.{node.attr}")
    return found


CHECKS: Dict[str, Callable[[Path, Path], List[str]]] = {
    "map": check_map,
    "twins": check_twins,
    "direction": check_import_direction,
    "core_imports": check_core_imports,
    "core_effects": check_core_effects,
    "core_parameters": check_core_parameters,
    "cycles": check_no_cycles,
    "sql": check_sql_in_store,
    "public_names": check_adapters_use_public_names,
}


def _assert_none(violations: Sequence[str]) -> None:
    assert not violations, f"{len(violations)} violation(s):\n" + "\n".join(violations)


# --- the rules, on the real package ------------------------------------------------------------

def test_every_module_is_in_the_map_with_the_layer_of_its_place_in_the_tree():
    """docs/architecture.md gives every module's folder a layer, and lists nothing else."""
    _assert_none(check_map(PACKAGE, ARCHITECTURE))


def test_a_concepts_twins_share_a_capability():
    """core/<capability>/<concept>.py and its services twin sit in the same capability."""
    _assert_none(check_twins(PACKAGE, ARCHITECTURE))


def test_modules_import_only_their_own_layer_or_the_ones_before():
    """No module imports a later layer, and nothing but an adapter imports an adapter."""
    _assert_none(check_import_direction(PACKAGE, ARCHITECTURE))


def test_the_core_imports_only_the_allowlist():
    """The core imports only allowlisted standard-library modules, jsonschema and other core."""
    _assert_none(check_core_imports(PACKAGE, ARCHITECTURE))


def test_the_core_reads_no_clock_environment_randomness_files_or_sockets():
    """No core code reads the clock (clock aside), the environment, global randomness or files."""
    _assert_none(check_core_effects(PACKAGE, ARCHITECTURE))


def test_the_core_never_receives_a_store_session_or_socket():
    """No core function or field takes a store, session, socket or connection."""
    _assert_none(check_core_parameters(PACKAGE, ARCHITECTURE))


def test_the_package_has_no_import_cycle():
    """The run-time import graph between package modules is acyclic."""
    _assert_none(check_no_cycles(PACKAGE, ARCHITECTURE))


def test_sql_and_database_drivers_live_only_in_the_store():
    """Drivers, .sql files and SQL statements appear only in the store layer."""
    _assert_none(check_sql_in_store(PACKAGE, ARCHITECTURE))


def test_adapters_import_only_public_names():
    """Adapters import no private name and no private module of the package."""
    _assert_none(check_adapters_use_public_names(PACKAGE, ARCHITECTURE))


# --- the checks can fail: one violation planted at a time in a copy ----------------------------

def copy_package(tmp_path: Path) -> Tuple[Path, Path]:
    """A copy of the package (setup.cfg and its mapped directories included) and of the map."""
    ignore = shutil.ignore_patterns("__pycache__")
    outside = [d for d in package_dirs(PACKAGE).values() if not d.is_relative_to(PACKAGE)]
    for directory in [PACKAGE, *outside]:
        if not any(directory != other and directory.is_relative_to(other) for other in outside):
            shutil.copytree(directory, tmp_path / directory.relative_to(REPO), ignore=ignore)
    if (REPO / "setup.cfg").is_file():
        shutil.copy(REPO / "setup.cfg", tmp_path / "setup.cfg")
    (tmp_path / "docs").mkdir()
    shutil.copy(ARCHITECTURE, tmp_path / "docs" / "architecture.md")
    return tmp_path / NAME, tmp_path / "docs" / "architecture.md"


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + text.strip() + "\n",
                    encoding="utf-8")


def _plant_in(relative: str, text: str) -> Callable[[Path, Path], None]:
    def plant(root: Path, architecture: Path) -> None:
        _append(root / relative, text)
    return plant


def _plant_module(root: Path, architecture: Path) -> None:
    (root / "unmapped.py").write_text('"""A module nobody put on the map."""\n', encoding="utf-8")


def _plant_ghost_row(root: Path, architecture: Path) -> None:
    text = architecture.read_text(encoding="utf-8")
    row = f"| `{NAME}/core/` |"
    assert row in text
    ghost = f"| `{NAME}/ghost/` | core | A folder that does not exist. |\n"
    architecture.write_text(text.replace(row, ghost + row, 1), encoding="utf-8")


def _plant_folder_without_row(root: Path, architecture: Path) -> None:
    (root / "extra").mkdir()
    (root / "extra" / "__init__.py").write_text('"""A folder with no row."""\n', encoding="utf-8")


def _plant_cycle(root: Path, architecture: Path) -> None:
    _append(root / "core" / "text" / "caseless.py", "from ..intake import keys")
    _append(root / "core" / "intake" / "keys.py", "from ..text.caseless import get_ignoring_case")


def _plant_sql_file(root: Path, architecture: Path) -> None:
    (root / "services" / "queries.sql").write_text("SELECT 1;\n", encoding="utf-8")


def _plant_stray_twin(root: Path, architecture: Path) -> None:
    (root / "services" / "processing" / "breaker.py").write_text(
        '"""The breaker in the wrong place."""\n', encoding="utf-8")


KEYS = "core/intake/keys.py"
RETRY = "core/resilience/retry.py"
APP = "gateway/app.py"
FLOW = "services/flow/client.py"

PLANTED = [
    pytest.param(_plant_in(KEYS, "import datetime\n\ndef _planted():\n"
                           "    return datetime.datetime.now()"),
                 check_core_effects, "datetime.datetime.now", id="clock-datetime-now"),
    pytest.param(_plant_in(KEYS, "from datetime import datetime as D\n\ndef _planted():\n"
                           "    return D.utcnow()"),
                 check_core_effects, "datetime.datetime.utcnow", id="clock-aliased"),
    pytest.param(_plant_in(RETRY, "from ..clock import SystemClock as Wall\n\n"
                           "def _planted():\n    return Wall().now()"),
                 check_core_effects, f"{NAME}.core.clock.SystemClock", id="clock-system-clock"),
    pytest.param(_plant_in(KEYS, "import os\n\ndef _planted():\n    return os.environ['X']"),
                 check_core_effects, "os.environ", id="environment-read"),
    pytest.param(_plant_in(KEYS, "import random\n\ndef _planted():\n"
                           "    return random.random()"),
                 check_core_effects, "random.random", id="global-random"),
    pytest.param(_plant_in(KEYS, "from random import uniform as u\n\ndef _planted():\n"
                           "    return u(0, 1)"),
                 check_core_effects, "random.uniform", id="global-random-aliased"),
    pytest.param(_plant_in(KEYS, "import random\n\ndef _planted():\n"
                           "    return random.Random(4)"),
                 check_core_effects, "random.Random(...)", id="constructed-random"),
    pytest.param(_plant_in(KEYS, "import uuid\n\ndef _planted():\n    return uuid.uuid4()"),
                 check_core_effects, "uuid.uuid4", id="uuid"),
    pytest.param(_plant_in(KEYS, "def _planted(path):\n    with open(path) as f:\n"
                           "        return f.read()"),
                 check_core_effects, "builtins.open", id="open-file"),
    pytest.param(_plant_in(KEYS, "def _planted(path):\n    return path.read_text()"),
                 check_core_effects, ".read_text", id="path-read-text"),
    pytest.param(_plant_in(KEYS, "from ...store import open_store"),
                 check_import_direction, f"imports {NAME}.store (store)", id="core-imports-store"),
    pytest.param(_plant_in(KEYS, "from ...services.intake.webhook import receive"),
                 check_import_direction, f"imports {NAME}.services.intake.webhook (services)",
                 id="core-imports-services"),
    pytest.param(_plant_in(KEYS, "def _planted():\n    from ...gateway import make_app"),
                 check_import_direction, f"imports the adapter {NAME}.gateway",
                 id="core-imports-adapter-in-function"),
    pytest.param(_plant_in(KEYS, "def _planted():\n    from ... import Retrying"),
                 check_import_direction, "takes Retrying through the facade",
                 id="core-takes-a-service-through-the-facade"),
    pytest.param(_plant_in("__init__.py", "from .services.intake.webhook import receive"),
                 check_import_direction, "the facade re-exports lazily",
                 id="facade-eager-service-import"),
    pytest.param(_plant_in("core/fme/fmw.py", "from ...fme.callers import IntakeCaller"),
                 check_import_direction, f"imports the adapter {NAME}.fme.callers",
                 id="core-fme-imports-a-caller"),
    pytest.param(_plant_in("services/processing/processor.py",
                           "from ...gateway.server import GatewayServer"),
                 check_import_direction, f"imports the adapter {NAME}.gateway.server",
                 id="service-imports-the-gateway"),
    pytest.param(_plant_in(KEYS, "import requests"),
                 check_core_imports, "imports requests", id="core-non-stdlib-import"),
    pytest.param(_plant_in(KEYS, "def _planted(*, store=None):\n    return store"),
                 check_core_parameters, "parameter 'store'", id="core-store-parameter"),
    pytest.param(_plant_in(KEYS, "def _planted(db: 'Optional[SqlStore]'):\n    return db"),
                 check_core_parameters, "of type SqlStore", id="core-store-annotation"),
    pytest.param(_plant_cycle, check_no_cycles, f"{NAME}.core.text.caseless", id="import-cycle"),
    pytest.param(_plant_in(FLOW, "import sqlite3"),
                 check_sql_in_store, "database driver sqlite3", id="driver-outside-store"),
    pytest.param(_plant_sql_file, check_sql_in_store, "SQL file outside the store",
                 id="sql-file-outside-store"),
    pytest.param(_plant_in(FLOW, "_Q = 'SELECT status FROM ai_task_registry'"),
                 check_sql_in_store, "holds SQL text", id="sql-text-outside-store"),
    pytest.param(_plant_in(APP, "from ..core.text.redact import _private_helper"),
                 check_adapters_use_public_names, "private name _private_helper",
                 id="adapter-private-name"),
    pytest.param(_plant_in("cli/db.py", "from ..store import _x"),
                 check_adapters_use_public_names, "private name _x", id="adapter-private-relative"),
    pytest.param(_plant_in(APP, "from ..core.text import redact\n\n_R = redact._secret"),
                 check_adapters_use_public_names, "redact._secret", id="adapter-private-attribute"),
    pytest.param(_plant_module, check_map, f"{NAME}.unmapped is not in the map",
                 id="module-missing-from-map"),
    pytest.param(_plant_folder_without_row, check_map, f"{NAME}.extra is not in the map",
                 id="folder-missing-from-map"),
    pytest.param(_plant_ghost_row, check_map, f"{NAME}/ghost/, which holds no module",
                 id="map-lists-a-ghost"),
    pytest.param(_plant_stray_twin, check_twins, "belongs in services/resilience/",
                 id="twin-in-another-capability"),
]


@pytest.mark.parametrize("plant, check, expected", PLANTED)
def test_a_planted_violation_is_reported(tmp_path, plant, check, expected):
    """Each kind of violation, planted in a copy of the package, is reported by its check."""
    root, architecture = copy_package(tmp_path)
    plant(root, architecture)
    violations = check(root, architecture)
    assert any(expected in v for v in violations), \
        f"{check.__name__} missed {expected!r}; it reported:\n" + "\n".join(violations)


def test_the_unmodified_copy_is_clean(tmp_path):
    """The copy the meta-tests plant in passes every check as it is, so a report is no accident."""
    root, architecture = copy_package(tmp_path)
    _assert_none([v for check in CHECKS.values() for v in check(root, architecture)])


LAZY_FACADE = '''
"""A facade whose re-exports are loaded on first use."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

__version__ = "0"
_EXPORTS = {"receive": "fme_ai_resilience.services.intake.webhook"}


def __getattr__(name: str) -> Any:
    """Load a re-exported name on first use."""
    from .gateway import make_app  # lazy: runs only when the name is asked for
    from .services.intake import webhook
    return getattr(importlib.import_module(_EXPORTS[name]), name)
'''


def test_lazy_and_annotation_only_imports_are_not_violations(tmp_path):
    """Imports in the facade's __getattr__ or under TYPE_CHECKING break no rule."""
    root, architecture = copy_package(tmp_path)
    (root / "__init__.py").write_text(LAZY_FACADE, encoding="utf-8")
    _append(root / KEYS, "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                         "    from ...services.intake.webhook import receive\n    import requests")
    _assert_none([v for check in CHECKS.values() for v in check(root, architecture)])


def test_the_map_names_every_module():
    """docs/architecture.md's module list names every module of the package by its file."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    package = REPO / "fme_ai_resilience"
    missing = sorted(str(p.relative_to(package)) for p in package.rglob("*.py")
                     if "workspaces" not in p.parts and p != package / "__init__.py"
                     and f"`{p.name}`" not in text)
    assert missing == [], f"docs/architecture.md does not name: {missing}"
