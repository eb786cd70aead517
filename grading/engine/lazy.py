"""Lazy package attributes (PEP 562): a package's public names load their modules on first use.

    __getattr__, __dir__ = lazy_attributes(__name__, globals(), {"Name": ".module", ...})

Used by ``grading.engine`` and ``packs.bundle`` so that importing one submodule does not import
the whole package (what every command's start-up pays for).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from importlib import import_module
from typing import Any


def lazy_attributes(
    package: str, namespace: MutableMapping[str, Any], names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``names`` maps a public name to the relative
    module defining it; a loaded name is stored in ``namespace`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
