"""The two hash functions the shard router must reproduce bit for bit.

* Elasticsearch's ``Murmur3HashFunction.hash(String)``: murmur3_x86_32, seed 0, over the key's
  UTF-16 code units written little-endian (two bytes per ``char``), read as a signed int.
* Solr's ``Hash.murmurhash3_x86_32(CharSequence, ...)``: murmur3_x86_32, seed 0, over the key's
  UTF-8 bytes, and ``CompositeIdRouter``'s composite ids built on it (``tenant!doc``,
  ``tenant/bits!doc``, ``app!user!doc``) and route prefixes (``tenant!``) that name a hash range.

The hash itself comes from ``mmh3``; this module only prepares the bytes exactly as the Java code
sees them and combines hashes exactly as ``CompositeIdRouter.KeyParser`` does, including its Java
``int`` arithmetic (shift counts taken modulo 32, silent overflow) for malformed ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import mmh3

__all__ = [
    "INT_MAX",
    "INT_MIN",
    "HashRange",
    "es_murmur3",
    "solr_hash",
    "solr_murmur3",
    "solr_route_range",
    "solr_utf8",
    "to_int32",
]

INT_MIN = -(1 << 31)
INT_MAX = (1 << 31) - 1

#: Solr's separator between the parts of a composite id, and after a route prefix.
SEPARATOR = "!"
#: Solr's separator before an explicit bit count in a composite id part (``tenant/4!doc``).
BITS_SEPARATOR = "/"


def to_int32(value: int) -> int:
    """``value`` wrapped to a signed 32-bit int, as Java's ``int`` arithmetic does."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass(frozen=True, slots=True, order=True)
class HashRange:
    """An inclusive range of signed 32-bit hashes, like Solr's ``DocRouter.Range``."""

    min: int
    max: int

    def includes(self, value: int) -> bool:
        """True when ``value`` lies in the range."""
        return self.min <= value <= self.max

    def overlaps(self, other: HashRange) -> bool:
        """True when the two ranges share at least one hash."""
        return self.min <= other.max and other.min <= self.max

    def __str__(self) -> str:
        # Solr writes ranges with Integer.toHexString: unsigned, no leading zeros.
        return f"{self.min & 0xFFFFFFFF:x}-{self.max & 0xFFFFFFFF:x}"


#: The whole signed 32-bit hash space, which Solr shards partition.
FULL_RANGE = HashRange(INT_MIN, INT_MAX)


def es_murmur3(key: str) -> int:
    """Elasticsearch's routing hash of ``key`` (signed 32-bit).

    Follows ``org.elasticsearch.cluster.routing.Murmur3HashFunction.hash(String)``: each UTF-16
    code unit becomes two bytes, low byte first, and the bytes are hashed with murmur3_x86_32,
    seed 0. ``surrogatepass`` keeps a lone surrogate as its own code unit, as Java does.
    """
    return int(mmh3.hash(key.encode("utf-16-le", "surrogatepass"), 0, signed=True))


def solr_utf8(text: str) -> bytes:
    """The bytes Solr's ``Hash.murmurhash3_x86_32(CharSequence, ...)`` hashes for ``text``.

    For well-formed text that is plain UTF-8. Solr encodes char by char, so for text holding
    unpaired surrogates it writes what its loop writes: a surrogate at the end of the text as
    three bytes, and any other surrogate combined with the char after it as a four-byte
    sequence (whatever that char is).
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    units = text.encode("utf-16-le", "surrogatepass")
    codes = [units[i] | (units[i + 1] << 8) for i in range(0, len(units), 2)]
    out = bytearray()
    pos, end = 0, len(codes)
    while pos < end:
        code = codes[pos]
        pos += 1
        if code < 0x80:
            out.append(code)
        elif code < 0x800:
            out += bytes((0xC0 | (code >> 6), 0x80 | (code & 0x3F)))
        elif code < 0xD800 or code > 0xDFFF or pos >= end:
            out += bytes((0xE0 | (code >> 12), 0x80 | ((code >> 6) & 0x3F), 0x80 | (code & 0x3F)))
        else:
            low = codes[pos]
            pos += 1
            utf32 = ((code - 0xD7C0) << 10) + (low & 0x3FF)
            out += bytes(
                (
                    0xFF & (0xF0 | (utf32 >> 18)),
                    0x80 | ((utf32 >> 12) & 0x3F),
                    0x80 | ((utf32 >> 6) & 0x3F),
                    0x80 | (utf32 & 0x3F),
                )
            )
    return bytes(out)


def solr_murmur3(text: str) -> int:
    """Solr's plain id hash: murmur3_x86_32, seed 0, over :func:`solr_utf8` (signed 32-bit)."""
    return int(mmh3.hash(solr_utf8(text), 0, signed=True))


# ---------------------------------------------------------------- composite ids (KeyParser)


def _shl(value: int, count: int) -> int:
    """Java ``value << count`` on ints: the count is taken modulo 32."""
    return to_int32(value << (count & 31))


def _ushr(value: int, count: int) -> int:
    """Java ``value >>> count`` on ints: the count is taken modulo 32."""
    return to_int32((value & 0xFFFFFFFF) >> (count & 31))


def _split_parts(key: str) -> list[str]:
    # CompositeIdRouter.KeyParser: at most three parts; a trailing "!" or "!!" adds no part, and
    # anything after a second separator, further separators included, is the third part.
    first = key.find(SEPARATOR)
    if first == -1:
        return [key]
    parts = [key[:first]]
    last = len(key) - 1
    if first < last:
        second = key.find(SEPARATOR, first + 1)
        if second == -1:
            parts.append(key[first + 1 :])
        elif second == last:
            if first < second - 1:
                parts.append(key[first + 1 : second])
        else:
            parts.append(key[first + 1 : second])
            parts.append(key[second + 1 :])
    return parts


def _num_bits(part: str, slash: int) -> int:
    # KeyParser.getNumBits: decimal digits after "/", Java int overflow included; -1 for a
    # non-digit or a count above 32 (an empty count reads as 0).
    value = 0
    for ch in part[slash + 1 :]:
        if not "0" <= ch <= "9":
            return -1
        value = to_int32(value * 10 + (ord(ch) - 48))
    return -1 if value > 32 else value


@dataclass(frozen=True, slots=True)
class _Parsed:
    hashes: tuple[int, ...]
    masks: tuple[int, ...]
    tri_level: bool


def _parse(key: str) -> _Parsed:
    parts = _split_parts(key)
    pieces = len(parts)
    if key.endswith(SEPARATOR) and pieces < 3:
        pieces += 1
    tri_level = pieces == 3
    bits = [8, 8] if tri_level else [16, 0]
    hashes: list[int] = []
    for i in range(pieces):
        if i < pieces - 1:
            slash = parts[i].find(BITS_SEPARATOR)
            if slash > 0:
                bits[i] = _num_bits(parts[i], slash)
                parts[i] = parts[i][:slash]
        # the empty last component of an id ending in "!"
        hashes.append(solr_murmur3(parts[i] if i < len(parts) else ""))
    if tri_level:
        first, second = bits
        m0 = 0 if first == 0 else _shl(-1, 32 - first)
        total = to_int32(first + second)
        m1 = 0 if total == 0 else _shl(-1, to_int32(32 - first - second))
        m1 ^= m0
        m2 = 0 if total == 32 else to_int32(~(m0 | m1))
        masks: tuple[int, ...] = (m0, m1, m2)
    else:
        first = bits[0]
        m0 = 0 if first == 0 else _shl(-1, 32 - first)
        m1 = 0 if first == 32 else _ushr(-1, first)
        masks = (m0, m1)
    return _Parsed(tuple(hashes), masks, tri_level)


def solr_hash(doc_id: str) -> int:
    """The hash Solr's ``CompositeIdRouter`` gives document ``doc_id`` (``sliceHash``).

    An id without ``!`` hashes whole. ``tenant!doc`` takes the top 16 bits from the tenant's hash
    and the low 16 from the document's; ``tenant/N!doc`` takes the top N bits from the tenant;
    ``app!user!doc`` takes 8 + 8 + 16 bits (``app/N!user/M!doc`` to choose N and M).
    """
    if SEPARATOR not in doc_id:
        return solr_murmur3(doc_id)
    parsed = _parse(doc_id)
    result = parsed.hashes[0] & parsed.masks[0]
    for value, mask in zip(parsed.hashes[1:], parsed.masks[1:], strict=False):
        result |= value & mask
    return to_int32(result)


def solr_route_range(route_key: str) -> HashRange:
    """The hash range a Solr route key covers (``CompositeIdRouter.keyHashRange``).

    ``tenant!`` covers every id ``tenant!...`` (the 2^16 hashes sharing the tenant's top 16
    bits), ``tenant/N!`` the hashes sharing its top N bits, ``app!user!`` those sharing the
    8 + 8 bits of app and user. A key without ``!`` is a single document: a one-hash range.
    """
    if SEPARATOR not in route_key:
        value = solr_murmur3(route_key)
        return HashRange(value, value)
    parsed = _parse(route_key)
    hashes, masks = parsed.hashes, parsed.masks
    if parsed.tri_level:
        lower = (hashes[0] & masks[0]) | (hashes[1] & masks[1])
        upper = lower | masks[2]
        whole = masks[0] == 0 and masks[1] == 0
    else:
        lower = hashes[0] & masks[0]
        upper = lower | masks[1]
        whole = masks[0] == 0
    if whole:
        # No bits from the prefix: Solr widens to the whole signed space.
        return FULL_RANGE
    return HashRange(to_int32(lower), to_int32(upper))
