"""The shard router: Elasticsearch- and SolrCloud-compatible key-to-shard routing, with splits.

``hashing`` reproduces the two hash functions, ``schemes`` the key-to-shard functions and
layouts, ``plan`` split plans, ``rule`` the YAML rule, ``router`` the chain stage.
"""

from dubbo_py.router.shard.hashing import (
    HashRange,
    es_murmur3,
    solr_hash,
    solr_murmur3,
    solr_route_range,
)
from dubbo_py.router.shard.plan import SplitPlan, plan_split
from dubbo_py.router.shard.router import BoundShardRouter, ShardRouter, compile_shard_document
from dubbo_py.router.shard.rule import KeySource, ShardRule, parse_key_source, parse_shard_rule
from dubbo_py.router.shard.schemes import (
    Layout,
    LayoutError,
    Location,
    Scheme,
    es_default_routing_num_shards,
    locate,
    make_layout,
    solr_shard_ranges,
)

__all__ = [
    "BoundShardRouter",
    "HashRange",
    "KeySource",
    "Layout",
    "LayoutError",
    "Location",
    "Scheme",
    "ShardRouter",
    "ShardRule",
    "SplitPlan",
    "compile_shard_document",
    "es_default_routing_num_shards",
    "es_murmur3",
    "locate",
    "make_layout",
    "parse_key_source",
    "parse_shard_rule",
    "plan_split",
    "solr_hash",
    "solr_murmur3",
    "solr_route_range",
    "solr_shard_ranges",
]
