"""Quantities compare exactly; the apply layer sees only differences the builder cares about."""

from __future__ import annotations

import pytest
from spindle.operator.kube import differences
from spindle.operator.quantity import QuantityError, format_bytes, quantity_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Gi", 2**30),
        ("1024Mi", 2**30),
        ("1G", 10**9),
        ("1.5Gi", 3 * 2**29),
        ("1e3", 1000),
        (2048, 2048),
        ("100m", 1),  # storage rounds up to a whole byte
    ],
)
def test_quantities_parse_to_exact_bytes(text: str | int, expected: int) -> None:
    assert quantity_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "1GB", "ten", "1.2.3Gi"])
def test_bad_quantity_is_refused_by_name(text: str) -> None:
    with pytest.raises(QuantityError, match="not a Kubernetes quantity"):
        quantity_bytes(text)


def test_format_bytes_is_short_and_always_has_a_unit() -> None:
    assert format_bytes(0) == "0B"
    assert format_bytes(202) == "202B"
    assert format_bytes(1023) == "1023B"
    assert format_bytes(1024) == "1Ki"
    assert format_bytes(1130) == "1.1Ki"
    assert format_bytes(1536 * 2**20) == "1.5Gi"
    assert format_bytes(2**60) == "1024Pi"


def test_server_filled_fields_are_not_differences() -> None:
    desired = {"metadata": {"labels": {"a": "1"}}, "spec": {"ports": [{"port": 9092}]}}
    live = {
        "metadata": {"labels": {"a": "1", "extra": "x"}, "resourceVersion": "5"},
        "spec": {"ports": [{"port": 9092, "protocol": "TCP"}], "clusterIP": "None"},
        "status": {},
    }
    assert differences(desired, live) == []


def test_changed_values_and_list_lengths_are_differences() -> None:
    desired = {"metadata": {"labels": {"a": "2"}}, "data": {"k": "v"}, "l": [1, 2]}
    live = {"metadata": {"labels": {"a": "1"}}, "data": {}, "l": [1]}
    assert differences(desired, live) == [".metadata.labels.a", ".data.k", ".l"]


def test_sizes_in_other_units_are_equal_but_growth_is_not() -> None:
    desired = {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}
    assert differences(desired, {"spec": {"resources": {"requests": {"storage": "1024Mi"}}}}) == []
    assert differences(desired, {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}) != []


def test_stale_owner_reference_is_a_difference_and_empty_matches_missing() -> None:
    desired = {"metadata": {"ownerReferences": []}}
    assert differences(desired, {"metadata": {}}) == []
    assert differences(desired, {"metadata": {"ownerReferences": [{"uid": "u"}]}}) == [
        ".metadata.ownerReferences"
    ]
