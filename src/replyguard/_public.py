"""Public names report the module users import them from (``replyguard.Verifier``), as httpx
does, so reprs and tracebacks show no private path. Where each was defined stays known."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping
from typing import Any

_DEFINED_IN: dict[int, str] = {}


def present_as(module: str, namespace: MutableMapping[str, Any], names: Iterable[str]) -> None:
    """Give each class and function of ``names`` in ``namespace`` the ``__module__`` ``module``.

    A pydantic model whose validator is not built yet (``defer_build``) resolves its forward
    references, when it is built, in the namespace of ``cls.__module__``: before that name
    changes, the model is handed its defining module's namespace as its parent namespace, which
    pydantic reads first, so it builds on first use exactly as before (and not at import).
    """
    for name in names:
        obj = namespace[name]
        if not isinstance(obj, type) and not callable(obj):
            continue
        original = getattr(obj, "__module__", None)
        if original is None or original == module:
            continue
        if isinstance(obj, type) and hasattr(obj, "__pydantic_parent_namespace__"):
            parent = obj.__pydantic_parent_namespace__ or {}
            obj.__pydantic_parent_namespace__ = {**vars(sys.modules[original]), **parent}
        _DEFINED_IN.setdefault(id(obj), original)
        obj.__module__ = module


def defined_in(obj: Any) -> str:
    """The module that defined ``obj``, whatever its ``__module__`` says now."""
    module: str = _DEFINED_IN.get(id(obj), obj.__module__)
    return module


def lazy_attribute(
    package: str,
    namespace: MutableMapping[str, Any],
    lazy: Mapping[str, str],
    name: str,
    presented: Collection[str] = (),
) -> Any:
    """The module ``__getattr__`` of a package whose names in ``lazy`` (name: module, relative
    to the package) load on first use: ``name`` imported, presented as ``replyguard``'s when in
    ``presented``, and kept in ``namespace`` so that the next look-up is a plain one.

    Every other lazy name whose module is loaded by then (the one imported, and what it
    imported) is presented and kept too, so that what ``help()`` and reprs show of the name
    asked for (a field typed ``RunMeta``, a parameter typed ``VerifierConfig``) reads
    ``replyguard.RunMeta``, as it did when the package imported everything at once."""
    module = lazy.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    loaded = {name: value}
    for other, where in lazy.items():
        source = sys.modules.get(f"{package}.{where}")
        if other not in namespace and other not in loaded and source is not None:
            # What it holds now: no lazy load of its own, and None while it is being imported.
            found = vars(source).get(other)
            if found is not None:
                loaded[other] = found
    present_as("replyguard", loaded, [each for each in loaded if each in presented])
    namespace.update(loaded)
    return value


def lazy_package(
    package: str,
    namespace: MutableMapping[str, Any],
    lazy: Mapping[str, str],
    presented: Collection[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module ``__getattr__`` and ``__dir__`` (PEP 562), its names in ``lazy``
    loaded on first use by ``lazy_attribute``: ``__getattr__, __dir__ = lazy_package(...)``."""

    def __getattr__(name: str) -> Any:
        return lazy_attribute(package, namespace, lazy, name, presented)

    def __dir__() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return __getattr__, __dir__
