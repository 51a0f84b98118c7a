"""Node paths as every store accepts them: ZooKeeper's rules (``PathUtils.validatePath``), and
the root, which every store has and none deletes."""

from __future__ import annotations

from dubbo_py.errors import NodeExistsError, StoreError

__all__ = [
    "ancestors",
    "child_path",
    "name_of",
    "parent_of",
    "validate_deletable_path",
    "validate_new_path",
    "validate_path",
]


def validate_path(path: str) -> str:
    """Return ``path`` if it is an absolute node path; otherwise raise :class:`StoreError`.

    Like ZooKeeper: it starts with ``/``, has no trailing ``/`` (except the root), no empty,
    ``.`` or ``..`` segment and no NUL or control character.
    """
    if not isinstance(path, str) or not path.startswith("/"):
        raise StoreError(f"invalid node path {path!r}: it must start with '/'")
    if path == "/":
        return path
    if path.endswith("/"):
        raise StoreError(f"invalid node path {path!r}: it must not end with '/'")
    for segment in path[1:].split("/"):
        if not segment:
            raise StoreError(f"invalid node path {path!r}: empty segment")
        if segment in (".", ".."):
            raise StoreError(f"invalid node path {path!r}: relative segment {segment!r}")
        if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in segment):
            raise StoreError(f"invalid node path {path!r}: control character")
    return path


def validate_new_path(path: str, address: str) -> str:
    """:func:`validate_path` for a node to create: :class:`NodeExistsError` for the root."""
    if validate_path(path) == "/":
        raise NodeExistsError(f"node / already exists in {address}")
    return path


def validate_deletable_path(path: str, address: str) -> str:
    """:func:`validate_path` for a node to delete: :class:`StoreError` for the root."""
    if validate_path(path) == "/":
        raise StoreError(f"cannot delete the root of {address}")
    return path


def parent_of(path: str) -> str:
    """The parent of a (valid, non-root) path: ``/a/b`` -> ``/a``, ``/a`` -> ``/``."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def name_of(path: str) -> str:
    """The last segment of a (valid, non-root) path."""
    return path.rsplit("/", 1)[1]


def child_path(parent: str, name: str) -> str:
    """Join a parent path and a child name."""
    return f"/{name}" if parent == "/" else f"{parent}/{name}"


def ancestors(path: str) -> list[str]:
    """The proper ancestors of a valid path, root excluded, outermost first."""
    parts = path.split("/")[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]
