"""Fixtures for the live tests against Apache Dubbo 3.3.6 (tests/peers/java/estate)."""

from __future__ import annotations

import uuid

import pytest

from tests.support.zookeeper import ZooKeeperServer


@pytest.fixture(scope="module")
def estate_registry(zookeeper: ZooKeeperServer) -> str:
    """The registry address both sides use. Dubbo Java keeps its nodes at ZooKeeper's root
    (a chroot in the address is not Java's), so tests keep apart by their own groups."""
    return f"zookeeper://{zookeeper.address}"


@pytest.fixture(scope="module")
def estate_group() -> str:
    """A group of this module's own, so no other test's providers are found."""
    return f"estate-{uuid.uuid4().hex[:8]}"
