"""``compression`` as a reference and a method option (issue 31, item 6): read from
``dubbo.yaml`` and code alike, the method's winning, bad names refused naming the key."""

from __future__ import annotations

import pytest

from dubbo_py import ConfigError, ReferenceConfig
from dubbo_py.config.loader import parse_config

HEAD = "application: a\nreferences:\n  demo.Greeter:\n"


def test_the_method_option_wins_over_the_reference_option() -> None:
    config = parse_config(
        HEAD + "    compression: GZIP\n    methods:\n      SayHello: {compression: deflate}\n"
    )
    ref = config.references["demo.Greeter"]
    assert (ref.compression_of("SayHello"), ref.compression_of("SayBye")) == ("deflate", "gzip")
    assert ReferenceConfig().compression_of("SayHello") is None
    merged = ReferenceConfig().merged(compression="none", methods={"M": {"compression": "gzip"}})
    assert merged.compression_of("M") == "gzip" and merged.compression_of("N") == "none"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("    compression: zip\n", "references.demo.Greeter.compression: 'zip'"),
        (
            "    methods:\n      SayHello: {compression: lz4}\n",
            "references.demo.Greeter.methods.SayHello.compression: 'lz4'",
        ),
    ],
)
def test_an_unknown_compression_is_refused_naming_the_key(body: str, where: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(HEAD + body)
    assert where in str(info.value)
