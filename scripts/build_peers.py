"""Build every peer under tests/peers/ (Java Dubbo 3.3, dubbo-go 3.3) once per machine.

``scripts/test.sh`` runs this before the suite, so that a missing tool or artifact is named
once, here, and the suite never times out waiting for a build. Builds are cached by source
hash (tests/support/peers.py); a warm machine takes well under a second.

    python3 scripts/build_peers.py            # every peer
    python3 scripts/build_peers.py java/estate
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.peers import PeerUnavailable, all_peers, ensure_built


def main(argv: list[str]) -> int:
    """Build the named peers (``language/name``), or every peer; exit 1 naming what failed."""
    wanted = [tuple(arg.split("/", 1)) for arg in argv] or all_peers()
    failed = 0
    for language, name in wanted:
        started = time.monotonic()
        try:
            peer = ensure_built(language, name)
        except PeerUnavailable as exc:
            print(f"build_peers: {exc}", file=sys.stderr)
            failed += 1
            continue
        took = time.monotonic() - started
        print(f"build_peers: {language}/{name} ready in {took:.1f} s: {peer.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
