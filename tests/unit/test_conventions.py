"""One convention everywhere (shared/STYLE.md): ``now`` keyword-only and required, injected
dependencies keyword-only, and every exception the library raises a ``ResilienceError``."""
from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import fme_ai_resilience
from fme_ai_resilience.core.errors import ResilienceError

PACKAGE = Path(fme_ai_resilience.__file__).resolve().parent
#: Parameters that carry an injected dependency: keyword-only wherever they appear.
INJECTED = ("clock", "rng", "session", "store")
#: Raises of another library's exceptions, on purpose: the timed connection raises urllib3's own
#: connect errors from inside urllib3's ``connect()``, so requests maps them as it maps its own.
FOREIGN_RAISES = {("fme_ai_resilience.services.http.sessions", "ConnectTimeoutError"),
                  ("fme_ai_resilience.services.http.sessions", "NewConnectionError")}


def _modules():
    for info in pkgutil.walk_packages(fme_ai_resilience.__path__, "fme_ai_resilience."):
        if info.name.split(".")[-1] not in ("sql", "__main__"):
            yield importlib.import_module(info.name)


MODULES = sorted(_modules(), key=lambda m: m.__name__)


def _functions():
    """Every function and method defined in the package, with its qualified name."""
    for module in MODULES:
        for _, obj in inspect.getmembers(module):
            if getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj):
                yield f"{module.__name__}.{obj.__qualname__}", obj
            elif inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    func = getattr(member, "__func__", member)
                    if inspect.isfunction(func):
                        yield f"{module.__name__}.{obj.__qualname__}.{attr}", func


FUNCTIONS = sorted(dict(_functions()).items())


def test_no_function_defaults_now_or_takes_it_by_position():
    """A forgotten ``now`` is an error, not a 1970 timestamp: keyword-only, no default."""
    wrong = []
    for name, func in FUNCTIONS:
        param = inspect.signature(func).parameters.get("now")
        if param is not None and (param.kind is not param.KEYWORD_ONLY
                                  or param.default is not param.empty):
            wrong.append(name)
    assert wrong == []


def test_injected_dependencies_are_keyword_only():
    """``clock=``, ``rng=``, ``session=`` and ``store=`` are never passed by position."""
    wrong = [f"{name}({p})" for name, func in FUNCTIONS
             for p, param in inspect.signature(func).parameters.items()
             if p in INJECTED and param.kind is not param.KEYWORD_ONLY]
    assert wrong == []


def test_every_exception_class_of_the_package_is_a_resilience_error():
    """Catching ``ResilienceError`` catches everything the library defines."""
    classes = {f"{m.__name__}.{c.__qualname__}": c for m in MODULES
               for _, c in inspect.getmembers(m, inspect.isclass)
               if c.__module__ == m.__name__ and issubclass(c, BaseException)}
    assert classes, "the walk found no exception class at all"
    assert [n for n, c in classes.items() if not issubclass(c, ResilienceError)] == []


def _raised_classes(module):
    """``(line, name)`` of each ``raise Name(...)`` / ``raise mod.Name(...)`` in a module."""
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    getattr_bodies = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                      and f.name == "__getattr__" for n in ast.walk(f)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None or id(node) in getattr_bodies:
            continue
        exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(exc, ast.Name) and exc.id[:1].isupper():
            yield node.lineno, exc.id
        elif isinstance(exc, ast.Attribute) and exc.attr[:1].isupper():
            yield node.lineno, exc.attr


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_raise_names_a_resilience_error(module):
    """No ``raise ValueError``/``TypeError``/``RuntimeError``: each raise is the library's own
    (a module ``__getattr__`` raising AttributeError is Python's protocol, and allowed)."""
    wrong = []
    for line, name in _raised_classes(module):
        if (module.__name__, name) in FOREIGN_RAISES:
            continue
        klass = getattr(module, name, None) or getattr(builtins, name, None)
        if not (isinstance(klass, type) and issubclass(klass, ResilienceError)):
            wrong.append(f"line {line}: raise {name}")
    assert wrong == []
