"""A subpackage's public API, each name imported from its module on first use (PEP 562).

Importing one light module of a folder then loads only what that module needs (a description needs neither
pinocchio nor sympy, ``sim.config`` no MuJoCo). A folder's ``__init__`` lists its API once::

    __all__, __getattr__, __dir__ = lazy_api(__name__, globals(), {"module": ("Name", ...), ...})
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module


def lazy_api(package: str, namespace: dict, api: dict[str, tuple[str, ...]]
             ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """(``__all__``, ``__getattr__``, ``__dir__``) of ``package`` whose ``api`` maps module -> its API names;
    a name, once imported, is kept in ``namespace`` (the package's globals)."""
    module_of = {name: module for module, names in api.items() for name in names}
    names = sorted(module_of)

    def __getattr__(name: str) -> object:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module_of[name]}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return names, __getattr__, __dir__


__all__ = ["lazy_api"]
