"""Topic name -> position in the 32-bit hash space (the one hash function)."""

from __future__ import annotations

import zlib

from balancer.units import HashPoint


def topic_hash(topic: str) -> HashPoint:
    """Hash a full topic name to its 32-bit position.

    Args:
        topic: the full name as written, e.g. ``persistent://tenant/ns/orders`` or
            ``persistent://tenant/ns/orders-partition-3`` (each partition hashes on its own).

    Returns:
        Unsigned CRC-32 (IEEE, as zlib and Guava's ``Hashing.crc32()``) of the UTF-8 bytes,
        0..0xffffffff.

    Source: Pulsar's NamespaceBundleFactory built with CRC-32 (PULSAR.md §11).
    """
    return zlib.crc32(topic.encode("utf-8")) & 0xFFFFFFFF


def format_hash(point: HashPoint) -> str:
    """Lower-case ``0x`` + 8 hex digits, the form used in bundle names and CLI output."""
    return f"0x{point:08x}"
