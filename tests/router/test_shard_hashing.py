"""Known answers from Elasticsearch's and Solr's own test suites, and hash properties.

Sources (cited per test):
* Elasticsearch ``Murmur3HashFunctionTests.testKnownValues``; ``IndexRoutingTests`` (formerly
  ``OperationRoutingTests``) ``testBWC``, ``testPartitionedIndexShrunk``,
  ``testPartitionedIndexBWC``; ``MetadataCreateIndexServiceTests.testCalculateNumRoutingShards``.
* Solr ``TestHashPartitioner`` (``testMapHashes``, ``testCompositeHashCodes``,
  ``testNonConformingCompositeIds`` and its table of hashes of "a".."z"), ``ShardRoutingTest``
  (hashes of "f1"/"f2", three-level ids), the ``CompositeIdRouter`` javadoc example.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dubbo_py.router.shard.hashing import (
    INT_MAX,
    INT_MIN,
    HashRange,
    es_murmur3,
    solr_hash,
    solr_murmur3,
    solr_route_range,
    to_int32,
)
from dubbo_py.router.shard.schemes import (
    Scheme,
    es_default_routing_num_shards,
    locate,
    make_layout,
    solr_composite_partition,
    solr_plain_partition,
    solr_shard_ranges,
)

# ---------------------------------------------------------------- Elasticsearch fixtures
# Transcribed from Elasticsearch's server/src/test/java/org/elasticsearch/cluster/routing/
# IndexRoutingTests.java. testBWC: routing value -> shard of an 8-shard index built with
# numberOfShards(8) (routing_num_shards 8); the answers are unchanged for indices created from
# 9.4, which route by floorMod(hash, 8).

BWC_TERM_TO_SHARD = {
    "sEERfFzPSI": 1, "cNRiIrjzYd": 7, "BgfLBXUyWT": 5, "cnepjZhQnb": 3, "OKCmuYkeCK": 6,
    "OutXGRQUja": 5, "yCdyocKWou": 1, "KXuNWWNgVj": 2, "DGJOYrpESx": 4, "upLDybdTGs": 5,
    "yhZhzCPQby": 1, "EyCVeiCouA": 1, "tFyVdQauWR": 6, "nyeRYDnDQr": 6, "hswhrppvDH": 0,
    "BSiWvDOsNE": 5, "YHicpFBSaY": 1, "EquPtdKaBZ": 4, "rSjLZHCDfT": 5, "qoZALVcite": 7,
    "yDCCPVBiCm": 7, "ngizYtQgGK": 5, "FYQRIBcNqz": 0, "EBzEDAPODe": 2, "YePigbXgKb": 1,
    "PeGJjomyik": 3, "cyQIvDmyYD": 7, "yIEfZrYfRk": 5, "kblouyFUbu": 7, "xvIGbRiGJF": 3,
    "KWimwsREPf": 4, "wsNavvIcdk": 7, "xkWaPcCmpT": 0, "FKKTOnJMDy": 7, "RuLzobYixn": 2,
    "mFohLeFRvF": 4, "aAMXnamRJg": 7, "zKBMYJDmBI": 0, "ElSVuJQQuw": 7, "pezPtTQAAm": 7,
    "zBjjNEjAex": 2, "PGgHcLNPYX": 7, "hOkpeQqTDF": 3, "chZXraUPBH": 7, "FAIcSmmNXq": 5,
    "EZmDicyayC": 0, "GRIueBeIyL": 7, "qCChjGZYLp": 3, "IsSZQwwnUT": 3, "MGlxLFyyCK": 3,
    "YmscwrKSpB": 0, "czSljcjMop": 5, "XhfGWwNlng": 1, "cWpKJjlzgj": 7, "eDzIfMKbvk": 1,
    "WFFWYBfnTb": 0, "oDdHJxGxja": 7, "PDOQQqgIKE": 1, "bGEIEBLATe": 6, "xpRkJPWVpu": 2,
    "kTwZnPEeIi": 2, "DifcuqSsKk": 1, "CEmLmljpXe": 5, "cuNKtLtyJQ": 7, "yNjiAnxAmt": 5,
    "bVDJDCeaFm": 2, "vdnUhGLFtl": 0, "LnqSYezXbr": 5, "EzHgydDCSR": 3, "ZSKjhJlcpn": 1,
    "WRjUoZwtUz": 3, "RiBbcCdIgk": 4, "yizTqyjuDn": 4, "QnFjcpcZUT": 4, "agYhXYUUpl": 7,
    "UOjiTugjNC": 7, "nICGuWTdfV": 0, "NrnSmcnUVF": 2, "ZSzFcbpDqP": 3, "YOhahLSzzE": 5,
    "iWswCilUaT": 1, "zXAamKsRwj": 2, "aqGsrUPHFq": 5, "eDItImYWTS": 1, "JAYDZMRcpW": 4,
    "lmvAaEPflK": 7, "IKuOwPjKCx": 5, "schsINzlYB": 1, "OqbFNxrKrF": 2, "QrklDfvEJU": 6,
    "VLxKRKdLbx": 4, "imoydNTZhV": 1, "uFZyTyOMRO": 4, "nVAZVMPNNx": 3, "rPIdESYaAO": 5,
    "nbZWPWJsIM": 0, "wRZXPSoEgd": 3, "nGzpgwsSBc": 4, "AITyyoyLLs": 4,
}  # fmt: skip

#: testPartitionedIndexShrunk before 9.4: routing_num_shards 8, 4 shards, partition size 3.
PARTITIONED_SHRUNK_LEGACY = {
    "a": {"a_0": 1, "a_1": 2, "a_2": 2, "a_3": 2, "a_4": 1, "a_5": 2},
    "b": {"b_0": 0, "b_1": 0, "b_2": 0, "b_3": 0, "b_4": 3, "b_5": 3},
    "c": {"c_0": 1, "c_1": 1, "c_2": 0, "c_3": 0, "c_4": 0, "c_5": 1},
    "d": {"d_0": 2, "d_1": 2, "d_2": 3, "d_3": 3, "d_4": 3, "d_5": 3},
}

#: testPartitionedIndexShrunk after MOD_ROUTING_FUNCTION (9.4): 4 shards, partition size 3,
#: routed by floorMod(hash, 4) (the explicit routing_num_shards 8 no longer matters).
PARTITIONED_SHRUNK_MODULO = {
    "a": {"a_0": 2, "a_1": 0, "a_2": 0, "a_3": 0, "a_4": 3, "a_5": 0},
    "b": {"b_0": 0, "b_1": 1, "b_2": 0, "b_3": 0, "b_4": 3, "b_5": 3},
    "c": {"c_0": 3, "c_1": 3, "c_2": 1, "c_3": 1, "c_4": 1, "c_5": 3},
    "d": {"d_0": 1, "d_1": 1, "d_2": 2, "d_3": 2, "d_4": 2, "d_5": 2},
}

#: testPartitionedIndexBWC: 6 shards (routing_num_shards 6), partition size 2; unchanged in 9.4.
PARTITIONED_BWC = {
    "a": {"a_0": 3, "a_1": 2, "a_2": 2, "a_3": 3},
    "b": {"b_0": 5, "b_1": 0, "b_2": 0, "b_3": 0},
    "c": {"c_0": 4, "c_1": 4, "c_2": 3, "c_3": 4},
    "d": {"d_0": 3, "d_1": 4, "d_2": 4, "d_3": 4},
}


# ---------------------------------------------------------------- Elasticsearch hash


@pytest.mark.parametrize(
    ("expected", "text"),
    [
        # Murmur3HashFunctionTests.testKnownValues
        (0x5A0CB7C3, "hell"),
        (0xD7C31989, "hello"),
        (0x22AB2984, "hello w"),
        (0xDF0CA123, "hello wo"),
        (0xE7744D61, "hello wor"),
        (0xE07DB09C, "The quick brown fox jumps over the lazy dog"),
        (0x4E63D2AD, "The quick brown fox jumps over the lazy cog"),
    ],
)
def test_es_murmur3_matches_elasticsearch_known_values(expected: int, text: str) -> None:
    assert es_murmur3(text) == to_int32(expected)


def test_es_hashes_are_signed_32_bit() -> None:
    assert es_murmur3("hello") == to_int32(0xD7C31989) < 0


def test_es_bwc_routing_of_an_8_shard_index() -> None:
    legacy = make_layout("elasticsearch", 8, routing_num_shards=8)
    modulo = make_layout("elasticsearch-modulo", 8)
    for term, shard in BWC_TERM_TO_SHARD.items():
        assert legacy.locate(term).shards == (shard,), term
        assert modulo.locate(term).shards == (shard,), term


@pytest.mark.parametrize(
    ("scheme", "routing_num_shards", "shards", "partition", "table"),
    [
        ("elasticsearch", 8, 4, 3, PARTITIONED_SHRUNK_LEGACY),
        ("elasticsearch-modulo", None, 4, 3, PARTITIONED_SHRUNK_MODULO),
        ("elasticsearch", 6, 6, 2, PARTITIONED_BWC),
        ("elasticsearch-modulo", None, 6, 2, PARTITIONED_BWC),
    ],
)
def test_es_partitioned_routing_known_shards(
    scheme: str,
    routing_num_shards: int | None,
    shards: int,
    partition: int,
    table: dict[str, dict[str, int]],
) -> None:
    layout = make_layout(
        scheme, shards, routing_num_shards=routing_num_shards, partition_size=partition
    )
    for routing, ids in table.items():
        for doc_id, shard in ids.items():
            assert layout.locate(routing, doc_id).shards == (shard,), (routing, doc_id)
        # Without an id, the routing value fans out to its whole partition, which holds them all.
        fan_out = set(layout.locate(routing).shards)
        assert set(ids.values()) <= fan_out


@pytest.mark.parametrize(
    ("shards", "expected"),
    # MetadataCreateIndexServiceTests.testCalculateNumRoutingShards
    [(1, 1024), (2, 1024), (3, 768), (9, 576), (512, 1024), (1024, 2048), (2048, 4096)],
)
def test_es_default_routing_num_shards(shards: int, expected: int) -> None:
    assert es_default_routing_num_shards(shards) == expected


@given(st.integers(min_value=1, max_value=10000))
def test_es_default_routing_num_shards_properties(shards: int) -> None:
    # The same test's random part: a multiple of shards by a power of two, splittable at least
    # once, and no larger than 1024 unless shards alone is past 512.
    routing = es_default_routing_num_shards(shards)
    factor = routing // shards
    assert factor * shards == routing
    assert factor >= 2 and factor & (factor - 1) == 0
    if routing > 1024:
        assert factor == 2


def test_es_partition_offset_wraps_like_java_int() -> None:
    # IndexRouting.Partitioned adds the id's offset to the routing hash with Java int addition,
    # so near INT_MAX it wraps to negative before floorMod. 65535 shards make the wrap visible
    # (2^32 is 1 mod 65535).
    shards, size = 65535, 65534
    layout = make_layout("elasticsearch-modulo", shards, partition_size=size)
    key = next(k for k in (f"k{i}" for i in range(1_000_000)) if es_murmur3(k) > INT_MAX - 60000)
    value = es_murmur3(key)
    doc_id = next(
        d for d in (f"id{i}" for i in range(1000)) if value + es_murmur3(d) % size > INT_MAX
    )
    unwrapped = value + es_murmur3(doc_id) % size
    assert layout.locate(key, doc_id).shards == ((unwrapped - (1 << 32)) % shards,)
    assert (unwrapped - (1 << 32)) % shards != unwrapped % shards


# ---------------------------------------------------------------- Solr hash

SOLR_LETTER_HASHES = {
    # TestHashPartitioner / ShardRoutingTest: "hash of a is 3c2569b2 ..."
    "a": 0x3C2569B2, "b": 0x95DE7E03, "c": 0xE132D65F, "d": 0x27191473, "e": 0x656C4367,
    "f": 0x2B64883B, "g": 0xF18AE416, "h": 0xD482B2D3, "i": 0x811A702B, "j": 0xCA745A39,
    "k": 0xCFBDA5D1, "l": 0x1D5D6A2C, "m": 0x5AE4385C, "n": 0xC651D8AC, "o": 0x68348473,
    "p": 0x986FDF9A, "q": 0xFF8209E8, "r": 0x5C9373F1, "s": 0xFF4ACAF1, "t": 0xCA87DF4D,
    "u": 0x62203AE0, "v": 0xBDAFCC55, "w": 0xFF439D1F, "x": 0x3E9A9B1B, "y": 0x477D9216,
    "z": 0xC1F69A17,
    # ShardRoutingTest: "hash of f1 is 313bf6b1", "hash of f2 is ff143f8"
    "f1": 0x313BF6B1, "f2": 0x0FF143F8,
}  # fmt: skip

# The same comment's shard of each letter in a 4-shard collection (Solr's shard1..shard4 are our
# shards 0..3): shard1 80000000-bfffffff, shard2 c0000000-ffffffff, shard3 0-3fffffff, shard4
# 40000000-7fffffff.
SOLR_LETTER_SHARDS = {
    "a": 2, "b": 0, "c": 1, "d": 2, "e": 3, "f": 2, "g": 1, "h": 1, "i": 0, "j": 1, "k": 1,
    "l": 2, "m": 3, "n": 1, "o": 3, "p": 0, "q": 1, "r": 3, "s": 1, "t": 1, "u": 3, "v": 0,
    "w": 1, "x": 2, "y": 3, "z": 1,
}  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), sorted(SOLR_LETTER_HASHES.items()))
def test_solr_murmur3_known_values(text: str, expected: int) -> None:
    assert solr_murmur3(text) == to_int32(expected)
    assert solr_hash(text) == to_int32(expected)  # an id without "!" hashes whole


def test_solr_letters_land_on_their_documented_shards() -> None:
    layout = make_layout("solr", 4)
    for letter, shard in SOLR_LETTER_SHARDS.items():
        assert layout.locate(letter).shards == (shard,), letter


def test_solr_four_shard_ranges() -> None:
    # ShardRoutingTest: "shard1: top bits:10 80000000:bfffffff" ... "shard4: ... 40000000:7fffffff"
    assert [str(r) for r in solr_shard_ranges(4)] == [
        "80000000-bfffffff",
        "c0000000-ffffffff",
        "0-3fffffff",
        "40000000-7fffffff",
    ]


def test_solr_composite_id_javadoc_example() -> None:
    # CompositeIdRouter javadoc: "contact" -> -541354036, "0000000KISS" -> 2099700320, and the
    # composite takes the upper 16 bits of the first and the lower 16 of the second.
    assert solr_murmur3("contact") == -541354036
    assert solr_murmur3("0000000KISS") == 2099700320
    assert solr_hash("contact!0000000KISS") == to_int32(0b11011111101110111110001001100000)


@pytest.mark.parametrize(
    ("doc_id", "shard"),
    [
        # TestHashPartitioner.testCompositeHashCodes (shardN -> N-1): the shard depends only on
        # the first part of the id, bit counts above 2 do not change a 4-shard answer ...
        ("b!foo", 0), ("c!bar", 1), ("d!baz", 2), ("e!qux", 3),
        ("b/2!foo", 0), ("c/2!bar", 1), ("d/2!baz", 2), ("e/2!qux", 3),
        ("b/32!foo", 0), ("c/32!bar", 1), ("d/32!baz", 2), ("e/32!qux", 3),
        # ... and with no bits from the first part, only the second decides.
        ("foo/0!b", 0), ("foo/0!c", 1), ("foo/0!d", 2), ("foo/0!e", 3),
        # ShardRoutingTest: three-level ids live with d!doc3 on shard3.
        ("f1!f2!doc5", 2), ("f1!f2!doc5/5", 2),
    ],
)  # fmt: skip
def test_solr_composite_ids_known_shards(doc_id: str, shard: int) -> None:
    assert make_layout("solr", 4).locate(doc_id).shards == (shard,)


@pytest.mark.parametrize(
    ("route_key", "shards"),
    [
        # TestHashPartitioner.testCompositeHashCodes and ShardRoutingTest (_route_ queries)
        ("b!", (0,)), ("c!", (1,)), ("d!", (2,)), ("e!", (3,)),
        ("foo/0!", (0, 1, 2, 3)),  # no bits from the prefix: the whole collection
        ("b/1!", (0, 1)),  # top bit of hash(b) is 1: shard1 and shard2
        ("d/1!", (2, 3)),  # top bit of hash(d) is 0: shard3 and shard4
        ("f1/8!", (2,)),  # holds f1!f2!doc5, on shard3 with d!doc3
        ("f1!f2!", (2,)),
    ],
)  # fmt: skip
def test_solr_route_prefixes_known_shards(route_key: str, shards: tuple[int, ...]) -> None:
    location = make_layout("solr", 4).locate(route_key)
    assert location.hash is None
    assert location.shards == shards


def test_solr_route_prefix_range_is_the_tenant_top_bits() -> None:
    top = solr_murmur3("b") & 0xFFFF0000
    assert solr_route_range("b!") == HashRange(to_int32(top), to_int32(top | 0xFFFF))
    assert solr_route_range("foo/0!") == HashRange(INT_MIN, INT_MAX)


@pytest.mark.parametrize(
    "doc_id",
    # TestHashPartitioner.testNonConformingCompositeIds: Solr routes these without an error.
    ["A!B!C!D", "!!!!!!", "A!!!!B", "A!!B!!C", "A/59!B", "A/8/!B/19/", "A!B/-5", "!/130!",
     "!!A/1000", "A//8!B///10!C////"],
)  # fmt: skip
def test_solr_non_conforming_ids_still_route(doc_id: str) -> None:
    layout = make_layout("solr", 4)
    assert len(layout.locate(doc_id).shards) == 1
    assert INT_MIN <= solr_hash(doc_id) <= INT_MAX


def test_solr_partition_of_the_full_range() -> None:
    # TestHashPartitioner.testMapHashes: the "natural" boundaries, no off-by-one.
    two = solr_composite_partition(2)
    assert two == [HashRange(INT_MIN, -1), HashRange(0, INT_MAX)]
    halves = solr_composite_partition(2, HashRange(0, 0x7FFFFFFF))
    assert halves == [HashRange(0, 0x3FFFFFFF), HashRange(0x40000000, 0x7FFFFFFF)]
    # The rounded three-way cut SolrCloud shows for a 3-shard collection.
    assert [str(r) for r in solr_shard_ranges(3)] == [
        "80000000-d554ffff",
        "d5550000-2aa9ffff",
        "2aaa0000-7fffffff",
    ]


@pytest.mark.parametrize("partitions", [*range(1, 101), *range(101, 2000, 37), 3999])
def test_solr_partition_properties_from_test_map_hashes(partitions: int) -> None:
    # TestHashPartitioner.testMapHashes: contiguous ranges covering the space; below 4000
    # partitions every boundary is rounded to a tenant (low 16 bits all ones) and sizes stay
    # within 1/16 of the ideal.
    ranges = solr_composite_partition(partitions)
    assert len(ranges) == partitions
    assert ranges[0].min == INT_MIN and ranges[-1].max == INT_MAX
    ideal = (1 << 32) // partitions
    last_end = INT_MIN - 1
    for rng in ranges:
        assert rng.min == last_end + 1
        assert rng.max & 0xFFFF == 0xFFFF
        assert abs(ideal - (rng.max - rng.min)) < ideal / 16
        last_end = rng.max


@settings(deadline=None, max_examples=40)
@given(st.integers(min_value=0, max_value=10), st.integers(min_value=0, max_value=4))
def test_solr_halving_a_power_of_two_layout_is_the_created_layout(k: int, more: int) -> None:
    assert solr_shard_ranges(1 << (k + more), 1 << k) == solr_shard_ranges(1 << (k + more))


def test_solr_halving_a_non_power_of_two_layout_differs_from_creating_it() -> None:
    # Why a split collection must state initial_shards: SPLITSHARD cuts without rounding.
    halved = solr_shard_ranges(6, 3)
    assert halved != solr_shard_ranges(6)
    assert halved[:2] == tuple(solr_plain_partition(2, solr_shard_ranges(3)[0]))


# ---------------------------------------------------------------- oracles and properties


def _murmur3_x86_32(data: bytes) -> int:
    """A plain transcription of murmur3_x86_32 (seed 0), independent of mmh3."""
    mask = 0xFFFFFFFF
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h1 = 0
    rounded = len(data) & ~3
    for i in range(0, rounded, 4):
        k1 = int.from_bytes(data[i : i + 4], "little")
        k1 = (k1 * c1) & mask
        k1 = ((k1 << 15) | (k1 >> 17)) & mask
        k1 = (k1 * c2) & mask
        h1 ^= k1
        h1 = ((h1 << 13) | (h1 >> 19)) & mask
        h1 = (h1 * 5 + 0xE6546B64) & mask
    tail = data[rounded:]
    if tail:
        k1 = int.from_bytes(tail, "little")
        k1 = (k1 * c1) & mask
        k1 = ((k1 << 15) | (k1 >> 17)) & mask
        k1 = (k1 * c2) & mask
        h1 ^= k1
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & mask
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & mask
    h1 ^= h1 >> 16
    return to_int32(h1)


def _solr_char_stream_hash(text: str) -> int:
    """Solr's Hash.murmurhash3_x86_32(CharSequence, ...), transcribed loop for loop: it encodes
    UTF-16 chars to UTF-8 on the fly, with its own handling of unpaired surrogates."""
    mask = 0xFFFFFFFF
    c1, c2 = 0xCC9E2D51, 0x1B873593
    units = text.encode("utf-16-le", "surrogatepass")
    chars = [units[i] | (units[i + 1] << 8) for i in range(0, len(units), 2)]
    h1 = k1 = shift = n_bytes = 0
    pos, end = 0, len(chars)

    def mix(k: int, h: int) -> int:
        k = (k * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        k = (k * c2) & mask
        h ^= k
        h = ((h << 13) | (h >> 19)) & mask
        return (h * 5 + 0xE6546B64) & mask

    while pos < end:
        code = chars[pos]
        pos += 1
        if code < 0x80:
            k2, bits = code, 8
        elif code < 0x800:
            k2, bits = (0xC0 | (code >> 6)) | ((0x80 | (code & 0x3F)) << 8), 16
        elif code < 0xD800 or code > 0xDFFF or pos >= end:
            k2 = (
                (0xE0 | (code >> 12))
                | ((0x80 | ((code >> 6) & 0x3F)) << 8)
                | ((0x80 | (code & 0x3F)) << 16)
            )
            bits = 24
        else:
            utf32 = chars[pos]
            pos += 1
            utf32 = ((code - 0xD7C0) << 10) + (utf32 & 0x3FF)
            k2 = (
                (0xFF & (0xF0 | (utf32 >> 18)))
                | ((0x80 | ((utf32 >> 12) & 0x3F)) << 8)
                | ((0x80 | ((utf32 >> 6) & 0x3F)) << 16)
                | ((0x80 | (utf32 & 0x3F)) << 24)
            )
            bits = 32
        k1 |= (k2 << shift) & mask
        shift += bits
        if shift >= 32:
            h1 = mix(k1, h1)
            shift -= 32
            k1 = (k2 >> (bits - shift)) & mask if shift else 0
            n_bytes += 4
    if shift > 0:
        n_bytes += shift >> 3
        k = (k1 * c1) & mask
        k = ((k << 15) | (k >> 17)) & mask
        h1 ^= (k * c2) & mask
    h1 ^= n_bytes
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & mask
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & mask
    h1 ^= h1 >> 16
    return to_int32(h1)


# Text with lone surrogates too: both Java hashes take any sequence of UTF-16 chars.
any_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)


def test_oracles_agree_with_published_values() -> None:
    assert _murmur3_x86_32("hello".encode("utf-16-le")) == to_int32(0xD7C31989)
    assert _solr_char_stream_hash("f1") == to_int32(0x313BF6B1)


@given(any_text)
def test_es_murmur3_hashes_utf16le_code_units(text: str) -> None:
    assert es_murmur3(text) == _murmur3_x86_32(text.encode("utf-16-le", "surrogatepass"))


@given(any_text)
def test_solr_murmur3_matches_solrs_char_stream_hash(text: str) -> None:
    assert solr_murmur3(text) == _solr_char_stream_hash(text)


@given(st.text(max_size=40))
def test_solr_murmur3_is_murmur3_of_utf8(text: str) -> None:
    assert solr_murmur3(text) == _murmur3_x86_32(text.encode("utf-8"))


part = st.text(alphabet=st.characters(exclude_characters="!/"), max_size=12)
# Solr reads "/N" only after a non-empty part and drops an empty middle part of "a!!"
# (SOLR-6257), so the prefix properties below hold for non-empty parts.
name = st.text(alphabet=st.characters(exclude_characters="!/"), min_size=1, max_size=12)


@given(part, part)
def test_solr_tenant_documents_lie_in_the_tenant_range(tenant: str, doc: str) -> None:
    assert solr_route_range(f"{tenant}!").includes(solr_hash(f"{tenant}!{doc}"))


@given(name, st.integers(min_value=1, max_value=32), part)
def test_solr_bits_prefix_range_holds_its_documents(tenant: str, bits: int, doc: str) -> None:
    rng = solr_route_range(f"{tenant}/{bits}!")
    assert rng.includes(solr_hash(f"{tenant}/{bits}!{doc}"))
    assert rng.max - rng.min == (1 << (32 - bits)) - 1


@given(name, name, part)
def test_solr_three_level_ids_lie_in_both_prefix_ranges(app: str, user: str, doc: str) -> None:
    value = solr_hash(f"{app}!{user}!{doc}")
    assert solr_route_range(f"{app}!{user}!").includes(value)
    assert solr_route_range(f"{app}/8!").includes(value)


def test_solr_empty_middle_part_is_dropped_from_a_prefix() -> None:
    # "a!!" has two separators as its last two chars: Solr keeps one part (SOLR-6257), so it
    # is the two-level prefix "a!", not the three-level "a!!".
    assert solr_route_range("a!!") == solr_route_range("a!")


@given(st.text(max_size=60))
def test_solr_any_id_hashes_and_any_prefix_has_a_range(text: str) -> None:
    assert INT_MIN <= solr_hash(text) <= INT_MAX
    rng = solr_route_range(text + "!")
    assert INT_MIN <= rng.min <= rng.max <= INT_MAX


@given(
    st.sampled_from(list(Scheme)),
    st.integers(min_value=1, max_value=64),
    st.text(max_size=30),
)
def test_unpartitioned_key_maps_to_exactly_one_shard(scheme: Scheme, shards: int, key: str) -> None:
    if scheme is Scheme.SOLR:
        key = key.rstrip("!")  # a key ending in "!" is a route prefix, not a document
    location = locate(scheme, shards, key)
    assert len(location.shards) == 1
    assert 0 <= location.shards[0] < shards
    assert location.hash is not None
