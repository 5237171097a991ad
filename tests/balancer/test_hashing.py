from balancer.hashing import format_hash, topic_hash


def test_topic_hash_is_standard_crc32_check_value():
    # The CRC-32 (IEEE) check value of "123456789" is 0xcbf43926 in every implementation.
    assert topic_hash("123456789") == 0xCBF43926


def test_topic_hash_matches_known_crc32_vector():
    assert topic_hash("The quick brown fox jumps over the lazy dog") == 0x414FA339


def test_topic_hash_hashes_utf8_bytes_of_the_full_name():
    name = "persistent://tenant/ns/ordres-é"
    assert topic_hash(name) != topic_hash(name.encode("utf-8").decode("latin-1"))
    assert topic_hash("persistent://t/ns/x") != topic_hash("t/ns/x")


def test_partitions_hash_independently():
    assert topic_hash("persistent://t/ns/x-partition-0") != topic_hash(
        "persistent://t/ns/x-partition-1"
    )


def test_format_hash_is_lowercase_eight_digits():
    assert format_hash(0xABC) == "0x00000abc"
    assert format_hash(0xFFFFFFFF) == "0xffffffff"
