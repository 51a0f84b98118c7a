"""The same routing question asked of Apache Dubbo 3.3.6 (tests/peers/java/oracle) and of dubbo-py.

A *case* is one JSON object::

    {"kind": "condition" | "tag" | "affinity" | "configurator",
     "rule": "<YAML document>" (tag: may be "" for static tags only),
     "scope": "service" | "application"      (condition only; default service),
     "consumer": "<consumer URL>", "providers": ["<provider URL>", ...],
     "invocation": {"method": ..., "arguments": [...], "attachments": {...}}}

and its *answer* is ``{"kept": [indexes of the providers kept]}``, ``{"error": "<why>"}`` when the
rule is refused, or for configurators ``{"urls": [parameters of each provider once configured]}``.
:class:`JavaOracle` asks Dubbo's own classes (one JVM, cases pipelined over stdin/stdout);
:func:`dubbo_py_answer` asks dubbo-py's routers and configurators, built and bound exactly as a
consumer builds them from a config-center document; :func:`compare` says how two answers differ.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

Case = dict[str, Any]
Answer = dict[str, Any]

MAIN_CLASS = "oracle.RouterOracle"


class JavaOracle:
    """One JVM running Dubbo 3.3.6's routers; :meth:`ask` answers cases in order."""

    def __init__(self, command: list[str]) -> None:
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            bufsize=1 << 16,
        )
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()
        if ready.strip() != "READY":
            self.close()
            raise RuntimeError(f"the router oracle did not start (printed {ready!r})")

    @classmethod
    def start(cls) -> JavaOracle:
        """Build the peer if needed (tests/support/peers.py) and start it."""
        from tests.support.peers import ensure_built

        peer = ensure_built("java", "oracle")
        return cls(peer.java_command(MAIN_CLASS))

    def ask(self, cases: Iterable[Case]) -> Iterator[Answer]:
        """Dubbo's answers, in order; the cases are written from a thread so that a long batch
        never fills both pipes."""
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        batch = [json.dumps(c, separators=(",", ":")) for c in cases]

        def write() -> None:
            assert process.stdin is not None
            for line in batch:
                process.stdin.write(line + "\n")
            process.stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        for _ in batch:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the router oracle ended (exit {process.poll()})")
            answer = json.loads(line)
            answer.pop("id", None)
            yield answer
        writer.join()

    def close(self) -> None:
        """Stop the JVM (closing stdin ends it)."""
        process = self._process
        if process.stdin is not None and not process.stdin.closed:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> JavaOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------- dubbo-py's side


def _invocation(case: Case, consumer: URL) -> Invocation:
    call = case.get("invocation") or {}
    return Invocation(
        consumer.path or "",
        call.get("method") or "",
        attachments={str(k): str(v) for k, v in (call.get("attachments") or {}).items()},
        explicit_arguments=tuple(call.get("arguments") or ()),
    )


def _route(routers: list[Any], case: Case) -> Answer:
    from dubbo_py.router.snapshot import Snapshot

    consumer = URL.parse(case["consumer"])
    providers = tuple(URL.parse(p) for p in case["providers"])
    snapshot = Snapshot(providers)
    call = _invocation(case, consumer)
    mask = snapshot.all
    for router in routers:
        mask = router.bind(snapshot, consumer).route(mask, call)
    return {"kept": [i for i in range(len(providers)) if mask >> i & 1]}


def dubbo_py_answer(case: Case) -> Answer:
    """dubbo-py's answer to a case, its routers built as a consumer builds them from the
    document (a RuleError is the refusal)."""
    kind = case["kind"]
    rule = case.get("rule") or ""
    try:
        if kind == "condition":
            from dubbo_py.router.condition import carriers

            return _route(
                carriers.routers_from_yaml(rule, "oracle", case.get("scope") or "service"), case
            )
        if kind == "tag":
            from dubbo_py.router.tag import TagRouter, parse_tag_rule

            return _route([TagRouter(parse_tag_rule(rule, "oracle") if rule else None)], case)
        if kind == "affinity":
            from dubbo_py.router import affinity

            return _route(list(affinity.service_routers(rule, "oracle")), case)
        if kind == "configurator":
            from dubbo_py.cluster import configurators

            configurators.parse_configurators_yaml(rule, "oracle")
            providers = [URL.parse(p) for p in case["providers"]]
            configured = configurators.apply(providers, [], {"oracle": rule})
            return {"urls": [dict(sorted(u.parameters.items())) for u in configured]}
    except RuleError as exc:
        return {"error": str(exc)}
    raise ValueError(f"unknown kind {kind!r}")


# --------------------------------------------------------------------------- comparing


def compare(java: Answer, python: Answer) -> str | None:
    """None when the answers agree, else the category of the difference."""
    if "error" in java or "error" in python:
        if "error" in java and "error" in python:
            return None
        return "java refuses, dubbo-py accepts" if "error" in java else "dubbo-py refuses, java accepts"
    if "kept" in java:
        return None if java["kept"] == python.get("kept") else "different providers kept"
    if java.get("urls") != python.get("urls"):
        return "different parameters"
    return None


def differing_parameters(java: Answer, python: Answer) -> Mapping[str, Any]:
    """For configurator answers: per URL, the keys whose values differ (java, dubbo-py)."""
    out: dict[str, Any] = {}
    for i, (j, p) in enumerate(zip(java.get("urls", []), python.get("urls", []), strict=False)):
        keys = sorted(set(j) | set(p))
        diff = {k: (j.get(k), p.get(k)) for k in keys if j.get(k) != p.get(k)}
        if diff:
            out[str(i)] = diff
    return out


def documented(case: Case, java: Answer, python: Answer) -> str | None:
    """The reason, when two answers differ where dubbo-py differs on purpose (docs/design.md §8,
    "Router oracle"), else None."""
    return None
