"""The test Nacos server (tests/support/nacos.py) is a real Nacos that Nacos's own Python client
works against: an instance registered under Dubbo's interface-level service name is discovered
with its URL parameters, and a rule published in Dubbo's config group is read back and pushed
to a listener. This is what the ``nacos://`` store will stand on."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest
import v2.nacos as nacos_v2  # nacos-sdk-python, a dev dependency: missing fails, not skips

from tests.support.nacos import NacosServer

pytestmark = pytest.mark.nacos


def _client_config(server: NacosServer, tmp_path: Path) -> object:
    return (
        nacos_v2.ClientConfigBuilder()
        .server_address(server.address)
        .log_level("WARNING")
        .cache_dir(str(tmp_path / "cache"))
        .log_dir(str(tmp_path / "log"))
        .build()
    )


def test_instance_registered_under_dubbo_service_name_is_discovered(
    nacos: NacosServer, tmp_path: Path
) -> None:
    interface = f"org.example.Greeter{uuid.uuid4().hex[:8]}"
    service = f"providers:{interface}:1.0.0:blue"
    params = {"interface": interface, "version": "1.0.0", "group": "blue", "side": "provider"}

    async def scenario() -> list[tuple[str, int, dict[str, str]]]:
        naming = await nacos_v2.NacosNamingService.create_naming_service(
            _client_config(nacos, tmp_path)
        )
        try:
            await naming.register_instance(
                nacos_v2.RegisterInstanceParam(
                    service_name=service, ip="127.0.0.1", port=50051, metadata=params
                )
            )
            deadline = time.monotonic() + 10
            found: list[object] = []
            while time.monotonic() < deadline and not found:
                found = await naming.list_instances(
                    nacos_v2.ListInstanceParam(
                        service_name=service, subscribe=False, healthy_only=None
                    )
                )
                await asyncio.sleep(0.1)
            return [(i.ip, i.port, dict(i.metadata)) for i in found]
        finally:
            await naming.shutdown()

    assert asyncio.run(scenario()) == [("127.0.0.1", 50051, params)]


def test_rule_published_in_dubbo_group_is_read_and_pushed(
    nacos: NacosServer, tmp_path: Path
) -> None:
    data_id = f"demo-{uuid.uuid4().hex[:8]}.condition-router"

    async def scenario() -> tuple[str, list[str]]:
        config = await nacos_v2.NacosConfigService.create_config_service(
            _client_config(nacos, tmp_path)
        )
        pushed: list[str] = []

        async def listener(tenant: str, data: str, group: str, content: str) -> None:
            pushed.append(content)

        try:
            assert await config.publish_config(
                nacos_v2.ConfigParam(data_id=data_id, group="dubbo", content="v1")
            )
            read = ""
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and read != "v1":
                read = await config.get_config(nacos_v2.ConfigParam(data_id=data_id, group="dubbo"))
                await asyncio.sleep(0.1)
            await config.add_listener(data_id, "dubbo", listener)
            await config.publish_config(
                nacos_v2.ConfigParam(data_id=data_id, group="dubbo", content="v2")
            )
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and "v2" not in pushed:
                await asyncio.sleep(0.05)
            return read, pushed
        finally:
            await config.shutdown()

    read, pushed = asyncio.run(scenario())
    assert read == "v1"
    assert "v2" in pushed
