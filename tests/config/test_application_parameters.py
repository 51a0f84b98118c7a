"""An application's own URL parameters (``Application(parameters=...)``, ``dubbo.yaml``
``application.parameters``): every consumer URL carries them, a reference's parameters win, and
bad ones are errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

import dubbo_py
from dubbo_py.config.loader import parse_config
from dubbo_py.errors import ConfigError


def test_the_file_reads_them_as_strings() -> None:
    config = parse_config(
        "application:\n  name: shop\n  parameters: {region: x, rack: 7, canary: true}\n", source="f"
    )
    assert dict(config.parameters) == {"region": "x", "rack": "7", "canary": "true"}
    assert dict(parse_config("application: shop\n", source="f").parameters) == {}


@pytest.mark.parametrize(
    ("parameters", "path", "problem"),
    [
        ("[region]", "application.parameters", "expected a mapping"),
        ("{side: provider}", "application.parameters.side", "sets this key itself"),
        ("{application: other}", "application.parameters.application", "sets this key"),
        ("{'a b': x}", "application.parameters.a b", "no '&'"),
        ("{region: [x, y]}", "application.parameters.region", "a string, number or boolean"),
    ],
)
def test_bad_ones_name_the_field(parameters: str, path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(f"application:\n  name: shop\n  parameters: {parameters}\n", source="f.yaml")
    assert caught.value.path == path
    assert problem in caught.value.problem
    assert "f.yaml" in str(caught.value)


def test_consumer_urls_carry_them_under_the_references_own(tmp_path: Path) -> None:
    with dubbo_py.Application(
        "shop", "tri://127.0.0.1:1", parameters={"region": "x", "rack": 7}
    ) as app:
        url = app._referencing._consumer_url("demo.Greeter", "1.0.0", "", {"rack": "9"}, None, None)
        assert url.parameters["region"] == "x"
        assert url.parameters["rack"] == "9"  # the reference's parameter wins
        assert url.parameters["application"] == "shop"
    with pytest.raises(ConfigError, match="interface"):
        dubbo_py.Application("shop", "tri://127.0.0.1:1", parameters={"interface": "x"})


def test_from_config_and_code(tmp_path: Path) -> None:
    path = tmp_path / "dubbo.yaml"
    path.write_text(
        "application:\n  name: shop\n  parameters: {region: x}\n"
        "registry: {address: 'tri://127.0.0.1:1'}\n"
    )
    with dubbo_py.Application.from_config(path) as app:
        assert dict(app.parameters) == {"region": "x"}


def test_provider_urls_carry_them_under_each_services_own() -> None:
    from demo import greeter_pb2_grpc

    @dubbo_py.service(version="1.0.0", tags={"rack": "r2"})
    class Greeter(greeter_pb2_grpc.GreeterServicer):
        pass

    with dubbo_py.Application(
        "bars-provider", "tri://127.0.0.1:1", parameters={"region": "x", "rack": "r1"}
    ) as app:
        server = app.start(Greeter(), port=0, host="127.0.0.1")
        try:
            [url] = server.urls
            assert url.parameters["region"] == "x"
            assert url.parameters["rack"] == "r2"  # the service's own parameter wins
            assert url.parameters["application"] == "bars-provider"
        finally:
            server.stop(0)
