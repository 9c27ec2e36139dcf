"""A volume's LogVolume and the status the operator writes on it."""

from __future__ import annotations

from spindle.operator import specs
from spindle.operator.decisions.volume_state import DirReport, Evidence
from spindle.operator.decisions.volume_status import LISTED_PARTITIONS, logvolume_status
from spindle.operator.specs import BrokerSpec


def test_logvolume_names_its_broker_and_leaves_desired_state_to_the_user(
    broker: BrokerSpec,
) -> None:
    lv = specs.build_logvolume(broker, broker.volumes[1])
    assert lv["metadata"]["name"] == "b7-data-1"
    assert lv["spec"] == {"broker": "b7", "brokerId": 7, "volumeId": 1}
    assert lv["metadata"]["ownerReferences"] == [specs.owner_reference(broker)]


def test_logvolume_status_uses_claim_capacity_once_bound(broker: BrokerSpec) -> None:
    volume = broker.volumes[0]
    pending = logvolume_status(
        volume, broker, current={}, pvc={"status": {"phase": "Pending"}}, generation=1, now="T"
    )
    assert pending["state"] == "Pending"
    assert pending["totalBytes"] == 2**30
    assert pending["usage"] == "?/1Gi"
    assert pending["path"] == "/var/lib/spindle/data-0"
    bound = logvolume_status(
        volume,
        broker,
        current={"state": "Active", "usedBytes": 512 * 2**20},
        pvc={
            "spec": {"volumeName": "pv-1"},
            "status": {"phase": "Bound", "capacity": {"storage": "2Gi"}},
        },
        generation=1,
        now="T",
    )
    assert bound["state"] == "Active"
    assert bound["pvName"] == "pv-1"
    assert bound["usage"] == "512Mi/2Gi"


def test_logvolume_status_lists_the_partitions_the_broker_reports_largest_first_and_capped(
    broker: BrokerSpec,
) -> None:
    sizes = {("t", p): 10 * p for p in range(LISTED_PARTITIONS + 20)}
    sizes[("a", 0)] = sizes[("t", LISTED_PARTITIONS + 19)]  # a tie is ordered by name
    report = DirReport(
        "/var/lib/spindle/data-0",
        None,
        replicas=len(sizes),
        used_bytes=sum(sizes.values()),
        total_bytes=2**30,
        partitions=sizes,
    )
    status = logvolume_status(
        broker.volumes[0], broker, current={}, pvc=None, generation=1, now="T",
        evidence=Evidence(report=report),
    )  # fmt: skip
    listed = [(p["topic"], p["partition"], p["sizeBytes"]) for p in status["partitions"]]
    assert status["replicaCount"] == LISTED_PARTITIONS + 21
    expected = [("a", 0, 10 * (LISTED_PARTITIONS + 19))] + [
        ("t", p, 10 * p) for p in range(LISTED_PARTITIONS + 19, 20, -1)
    ]
    assert listed == expected
    assert len(listed) == LISTED_PARTITIONS
    offline = logvolume_status(
        broker.volumes[0], broker, current=status, pvc=None, generation=1, now="T",
        evidence=Evidence(report=DirReport("/var/lib/spindle/data-0", "KafkaStorageError")),
    )  # fmt: skip
    assert "partitions" not in offline  # the last list stands until the broker reports again


def test_logvolume_status_shows_the_registered_directory_id_even_offline_and_keeps_the_last(
    broker: BrokerSpec,
) -> None:
    path = "/var/lib/spindle/data-0"

    def status(report: DirReport, current: dict[str, object]) -> dict[str, object]:
        return logvolume_status(
            broker.volumes[0], broker, current=current, pvc=None, generation=1, now="T",
            evidence=Evidence(report=report),
        )  # fmt: skip

    online = status(
        DirReport(path, None, total_bytes=2**30, directory_id="AAAAAAAAAAAAAAAAAAAAAQ"), {}
    )
    assert online["directoryId"] == "AAAAAAAAAAAAAAAAAAAAAQ"
    failed = DirReport(path, "KafkaStorageError", directory_id="AAAAAAAAAAAAAAAAAAAAAQ")
    assert status(failed, online)["directoryId"] == "AAAAAAAAAAAAAAAAAAAAAQ"
    # The registration could not be read this pass: nothing is written, the last one stays.
    assert "directoryId" not in status(DirReport(path, None, total_bytes=2**30), online)
    replaced = DirReport(path, None, total_bytes=2**30, directory_id="BBBBBBBBBBBBBBBBBBBBBQ")
    assert status(replaced, online)["directoryId"] == "BBBBBBBBBBBBBBBBBBBBBQ"
