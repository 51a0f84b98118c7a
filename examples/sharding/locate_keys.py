"""Where do keys live? Elasticsearch- and Solr-compatible shard routing, computed locally.

Run it from the repository root:  python examples/sharding/locate_keys.py

No server is involved: this shows the same functions the shard router and
``dubbo-py shard locate`` / ``dubbo-py shard plan`` use.
"""

from __future__ import annotations

from dubbo_py import (
    URL,
    Invocation,
    RouterChain,
    ShardRouter,
    Snapshot,
    make_layout,
    parse_shard_rule,
    plan_split,
)


def show(
    title: str, layout_args: dict[str, object], keys: list[str], doc_id: str | None = None
) -> None:
    layout = make_layout(**layout_args)  # type: ignore[arg-type]
    print(f"\n{title}")
    for key in keys:
        loc = layout.locate(key, doc_id)
        shown = "range " + str(loc.range) if loc.hash is None else f"hash {loc.hash}"
        print(f"  {key!r:24} {shown:32} -> shard(s) {list(loc.shards)}")


def main() -> None:
    # Elasticsearch, an index created before 9.4 with 4 shards: routing_num_shards defaults to
    # 1024, and a key's shard is floorMod(murmur3(key), 1024) / 256.
    show("elasticsearch, 4 shards", {"scheme": "elasticsearch", "shards": 4}, ["acme", "globex"])
    # The same index created on 9.4 or later: floorMod(murmur3(key), 4).
    show(
        "elasticsearch-modulo, 4 shards",
        {"scheme": "elasticsearch-modulo", "shards": 4},
        ["acme", "globex"],
    )
    # Routing partitions: a routing value spreads over 2 shards; the id picks one of them.
    part = {"scheme": "elasticsearch-modulo", "shards": 6, "partition_size": 2}
    show("partitioned, no id (fan-out)", part, ["b"])
    show("partitioned, id b_0", part, ["b"], doc_id="b_0")
    # SolrCloud composite ids: the tenant picks the top 16 bits, so a tenant stays together;
    # "tenant!" is a route prefix naming the tenant's hash range.
    show(
        "solr, 4 shards",
        {"scheme": "solr", "shards": 4},
        ["b!doc1", "b!doc2", "b!", "b/1!", "f1!f2!doc5"],
    )

    # A split from 2 to 4 shards: new shard j takes its keys from old shard j // 2.
    plan = plan_split("elasticsearch", 2, 4)
    print(f"\nsplit 2 -> 4: new shard <- old shard: {dict(enumerate(plan.sources))}")
    print(f"  rule while splitting: {plan.rule_fields(during=True)}")

    # The router during that split: old providers advertise shard=0/1, one new provider for
    # shard 2 (of 4) is up. Keys of new shard 3 still go to old shard 1.
    rule = parse_shard_rule(
        "scheme: elasticsearch\nshards: 4\nsplit_from: 2\nrouting_num_shards: 1024\n"
        "key: attachments[tenant]\n",
        "example.shard-router",
    )
    providers = (
        URL.parse("tri://10.0.0.1:50051/demo.Greeter?shard=0"),
        URL.parse("tri://10.0.0.2:50051/demo.Greeter?shard=1"),
        URL.parse("tri://10.0.0.3:50051/demo.Greeter?shard=2&shards=4"),
    )
    chain = RouterChain([ShardRouter(rule, "example.shard-router")]).bind(
        Snapshot(providers), URL.parse("consumer://10.0.0.9/demo.Greeter")
    )
    print("\nrouting during the split:")
    for tenant in ("acme", "globex", "initech", "umbrella", "hooli"):
        (new_shard,) = rule.layout.locate(tenant).shards
        (target,) = (
            u.address
            for u in chain.route(
                Invocation("demo.Greeter", "SayHello", attachments={"tenant": tenant})
            )
        )
        print(f"  {tenant:10} new shard {new_shard} -> {target}")


if __name__ == "__main__":
    main()
