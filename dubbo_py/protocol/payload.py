"""The largest message a Triple call carries by default, as in Apache Dubbo.

Dubbo 3.3's ``payload`` (``dubbo.protocol.payload``) defaults to 8 MiB for both directions of a
Triple call; gRPC's own default is 4 MiB for what a side receives. A Java provider's 4 MiB
reply is ordinary in a Dubbo estate, so dubbo-py's channels and servers take Dubbo's figure
unless the options given name their own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Dubbo's default ``payload``: 8 MiB.
DUBBO_PAYLOAD = 8 * 1024 * 1024

_LIMITS = ("grpc.max_receive_message_length", "grpc.max_send_message_length")


def with_payload_limits(options: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``options`` plus Dubbo's payload limit for each limit they do not set themselves."""
    given = list(options)
    named = {key for key, _ in given}
    return [*given, *((key, DUBBO_PAYLOAD) for key in _LIMITS if key not in named)]
