"""What an unreachable registry's error tells a newcomer to do (issue 35, finding 2): installed
but not running reads differently from not installed, and from a port ZooKeeper does not use."""

from __future__ import annotations

from pathlib import Path

from dubbo_py.registry.store.advice import start_advice


def _debian_zookeeper(tmp_path: Path, port: int = 2181) -> tuple[Path, Path]:
    server = tmp_path / "zkServer.sh"
    server.write_text("#!/bin/sh\n", encoding="utf-8")
    config = tmp_path / "zoo.cfg"
    config.write_text(f"tickTime=2000\ndataDir=/var/lib/zookeeper\nclientPort={port}\n")
    return server, config


def test_not_installed_says_install_it(tmp_path: Path) -> None:
    advice = start_advice(
        "zookeeper://127.0.0.1:2181", server=tmp_path / "absent", config=tmp_path / "absent.cfg"
    )
    assert advice == (
        "ZooKeeper is not installed on this machine: install it (Debian/Ubuntu: sudo apt-get "
        "install zookeeperd), or leave the registry unset to use the embedded one (no server "
        "needed)"
    )


def test_installed_but_not_running_says_how_to_start_it_with_and_without_init(
    tmp_path: Path,
) -> None:
    server, config = _debian_zookeeper(tmp_path)
    advice = start_advice("zookeeper://127.0.0.1:2181", server=server, config=config)
    assert advice == (
        "ZooKeeper is installed here but not running: start it (sudo systemctl start zookeeper, "
        f"or where there is no init system sudo {server} start), or leave the registry unset "
        "to use the embedded one (no server needed)"
    )
    assert "apt-get install" not in advice  # never "install what is installed"


def test_another_port_than_zookeepers_says_check_the_address(tmp_path: Path) -> None:
    server, config = _debian_zookeeper(tmp_path)
    advice = start_advice("zookeeper://localhost:2182", server=server, config=config)
    assert advice.startswith(
        f"ZooKeeper is installed here but set to listen on port 2181 (clientPort in {config}), "
        "not 2182: check the address, or start it ("
    )


def test_remote_and_etcd_registries(tmp_path: Path) -> None:
    server, config = _debian_zookeeper(tmp_path)
    remote = start_advice("zookeeper://zk1:2181,zk2:2181", server=server, config=config)
    assert remote.startswith("start ZooKeeper there, ")
    assert start_advice("etcd://127.0.0.1:2379").startswith("start etcd there (Debian/Ubuntu")
