"""Old import paths of moved modules, kept working for one release with a warning.

dubbo-py 0.2 moved the modules of ``dubbo_py/rpc/`` into ``consumer/``, ``provider/``, ``app/``
and ``protocol/``, and the registry stores into ``registry/store/`` (CHANGELOG, "Moved"). The
old paths the docs named stay importable until the release after it: each is a small module whose
names resolve, on first read, to the module's new home, and importing it warns once with
:class:`DeprecationWarning` where the import was written.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def alias(old: str, new: str) -> Callable[[str], Any]:
    """Warn that *old* moved to *new*; return the module ``__getattr__`` that reads from *new*.

    Names are read from *new* on first use, so importing the old path costs what importing the
    new one does, and an attribute that does not exist raises the usual AttributeError.
    """
    # stacklevel 3: past this function and the old module's top level, to the importing line
    # (importlib's own frames are skipped by the warnings machinery).
    warnings.warn(
        f"{old} moved to {new}; import its public names from dubbo_py "
        f"(the old path goes in the next release)",
        DeprecationWarning,
        stacklevel=3,
    )

    def __getattr__(name: str) -> Any:
        return getattr(importlib.import_module(new), name)

    return __getattr__
