"""Reading the JSON documents of application-level discovery (instance nodes, metadata)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["json_object"]


def json_object(data: bytes | str, where: str, error: type[Exception]) -> dict[str, Any]:
    """``data`` parsed as a JSON object, or ``error`` naming ``where`` and what is wrong."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise error(f"{where}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise error(f"{where}: expected a JSON object")
    return doc
