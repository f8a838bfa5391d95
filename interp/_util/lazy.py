"""Lazy package exports (PEP 562): `from interp.probes import probe` imports interp.probes.run only when the
name is first used, so `interp --help` and torch-free configs never pay for torch.

Each package's __init__ declares {name: submodule} once; inside a package, modules import their siblings
by full module path (interp.probes.metrics), never through the package, so no import cycle can form.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """(__getattr__, __dir__, __all__) for `package`, resolving each name in `exports` from
    `package.<submodule>`. Only public names are exported: private helpers are imported from their module."""
    private = sorted(n for n in exports if n.startswith("_"))
    if private:
        raise ValueError(f"{package}._EXPORTS lists private names {private}: import those from their module")

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)
