"""dubbo-go 3.3 processes (tests/peers/go/estate) as the other side of live tests.

``GoProvider``, ``GoUserService`` and ``GoConsumer`` run the peer's ``provider``,
``userservice`` and ``consumer`` binaries from its cached build, with the Java estate peer's
command line and stdin contract: stdout carries only the READY and RESULT lines (only READY for
``userservice``), dubbo-go's logs go to a file named in every failure.
"""

from __future__ import annotations

from tests.support.java_estate import JavaConsumer, JavaProvider
from tests.support.peers import Peer, ensure_built


def go_peer() -> Peer:
    """The dubbo-go estate peer, built now if this machine has not built these sources."""
    return ensure_built("go", "estate")


class GoProvider(JavaProvider):
    """``provider``: demo.Greeter exported on Triple by dubbo-go 3.3.2."""

    main_class = "go estate provider"

    def command_line(self) -> list[str]:
        return [str(go_peer().binary("provider")), *self.args]


class GoUserService(JavaProvider):
    """``userservice``: the Java-interface service estate.UserService exported over dubbo-go's
    ``dubbo`` protocol with hessian2 by dubbo-go 3.3.2, registered at interface level."""

    main_class = "go estate userservice"

    def command_line(self) -> list[str]:
        return [str(go_peer().binary("userservice")), *self.args]


class GoConsumer(JavaConsumer):
    """``consumer``: a dubbo-go 3.3.2 reference to demo.Greeter, driven over stdin."""

    main_class = "go estate consumer"

    def command_line(self) -> list[str]:
        return [str(go_peer().binary("consumer")), *self.args]
