"""The Broker custom resource is read into a validated spec, or refused naming the field."""

from __future__ import annotations

from typing import Any

import pytest
from spindle.operator.specs import BrokerSpec, SpecError

from .bodies import broker_body


def test_volumes_are_read_in_id_order_with_exact_sizes(broker: BrokerSpec) -> None:
    assert [v.id for v in broker.volumes] == [0, 1]
    assert [v.size_bytes for v in broker.volumes] == [2**30, 2 * 2**30]
    assert broker.volumes[0].delete_claim is True
    assert broker.volumes[1].delete_claim is False
    assert broker.generation == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"config": {"log.dirs": "/x"}}, "spec.config may not set log.dirs"),
        ({"volumes": []}, "at least one volume"),
        ({"volumes": [{"id": 0, "size": "1Gi"}, {"id": 0, "size": "2Gi"}]}, "appears twice"),
        ({"volumes": [{"id": 0, "size": "lots"}]}, "size quantity"),
    ],
)
def test_invalid_spec_is_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        BrokerSpec.from_body(broker_body(**change))
