import pytest

from balancer import bundles as b
from balancer.errors import ImpossibleSplit, InvalidBundleRange


def test_initial_boundaries_for_four_bundles():
    assert b.initial_boundaries(4) == [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]


def test_initial_boundaries_for_three_bundles_floor_the_step():
    assert b.initial_boundaries(3) == [0, 0x55555555, 0xAAAAAAAA, 0xFFFFFFFF]


def test_initial_boundaries_for_one_bundle_is_the_full_range():
    assert b.initial_boundaries(1) == [0, 0xFFFFFFFF]


@pytest.mark.parametrize("count", [0, -1, 1 << 32])
def test_initial_boundaries_reject_impossible_counts(count):
    with pytest.raises(InvalidBundleRange):
        b.initial_boundaries(count)


def test_bundle_names_use_lowercase_hex():
    names = [x.name for x in b.bundles_from_boundaries("t/ns", b.initial_boundaries(2))]
    assert names == ["t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"]


def test_parse_bundle_name_round_trips():
    bundle = b.parse_bundle_name("public/default/0x40000000_0x80000000")
    assert bundle.namespace == "public/default"
    assert (bundle.range.lower, bundle.range.upper) == (0x40000000, 0x80000000)
    assert bundle.name == "public/default/0x40000000_0x80000000"


@pytest.mark.parametrize("name", ["ns/a", "t/ns/0x80000000_0x40000000", "t/ns/0x1_0x2"])
def test_parse_bundle_name_rejects_bad_names(name):
    with pytest.raises(InvalidBundleRange):
        b.parse_bundle_name(name)


def test_a_hash_equal_to_a_boundary_belongs_to_the_bundle_starting_there():
    boundaries = b.initial_boundaries(4)
    assert b.bundle_index_for(boundaries, 0x40000000) == 1
    assert b.bundle_index_for(boundaries, 0x3FFFFFFF) == 0
    assert b.bundle_index_for(boundaries, 0) == 0


def test_hash_ffffffff_belongs_to_the_last_bundle():
    assert b.bundle_index_for(b.initial_boundaries(4), 0xFFFFFFFF) == 3
    assert b.BundleRange(0xC0000000, 0xFFFFFFFF).contains(0xFFFFFFFF)
    assert not b.BundleRange(0, 0x40000000).contains(0x40000000)


def test_bundle_for_topic_uses_the_crc32_of_the_full_name():
    from balancer.hashing import topic_hash

    topic = "persistent://public/default/orders"
    bundle = b.bundle_for_topic("public/default", b.initial_boundaries(4), topic)
    assert bundle.range.contains(topic_hash(topic))


def test_range_equally_divide_examples_from_the_spec():
    assert b.range_equally_divide(b.BundleRange(0, 0x80000000)) == 0x40000000
    assert b.range_equally_divide(b.BundleRange(0, 0xFFFFFFFF)) == 0x7FFFFFFF


def test_split_boundaries_replaces_the_parent_by_its_children():
    boundaries = b.initial_boundaries(2)
    out = b.split_boundaries(boundaries, b.BundleRange(0, 0x80000000), [0x40000000])
    assert out == [0, 0x40000000, 0x80000000, 0xFFFFFFFF]
    b.validate_boundaries(out)


@pytest.mark.parametrize("cut", [0, 0x80000000, 0x90000000])
def test_split_refuses_a_boundary_not_strictly_inside(cut):
    with pytest.raises(ImpossibleSplit):
        b.split_boundaries(b.initial_boundaries(2), b.BundleRange(0, 0x80000000), [cut])


def test_split_refuses_a_bundle_of_one_hash_point_and_an_unknown_bundle():
    with pytest.raises(ImpossibleSplit):
        b.split_boundaries([0, 1, 0xFFFFFFFF], b.BundleRange(0, 1), [])
    with pytest.raises(ImpossibleSplit):
        b.split_boundaries(b.initial_boundaries(2), b.BundleRange(0, 0x40000000), [0x100])
    with pytest.raises(ImpossibleSplit):
        b.split_boundaries(b.initial_boundaries(2), b.BundleRange(0, 0x80000000), [])


def test_validate_boundaries_rejects_gaps_and_disorder():
    with pytest.raises(InvalidBundleRange):
        b.validate_boundaries([0, 0x10, 0x10, 0xFFFFFFFF])
    with pytest.raises(InvalidBundleRange):
        b.validate_boundaries([1, 0xFFFFFFFF])


def test_namespace_of_topic():
    assert b.namespace_of_topic("persistent://acme/orders/x") == "acme/orders"
    assert b.namespace_of_topic("non-persistent://acme/orders/x-partition-1") == "acme/orders"
    with pytest.raises(InvalidBundleRange):
        b.namespace_of_topic("persistent://acme")
