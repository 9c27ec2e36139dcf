"""A released volume's id declared again, seen first by a periodic refresh: the refresh leaves
the still-released LogVolume alone (no status write, no cordon change); only the full reconcile
takes it back (``reconcile.release.reattach_released``), its desiredState reset before its
state, and the rest of that pass (cordons, drain, status) goes by the reset spec. The failures
this pins: a refresh that read the new spec before the reconcile wrote the LogVolume
``Released -> Active`` while its ``desiredState`` still read Drained (and uncordoned it); the
reattaching pass itself then wrote ``Pending -> Empty`` (cordoned) under ``desiredState``
Active, from its stale copy of the spec.

On fake bodies and a fake API (a dict of objects), fake time."""

from __future__ import annotations

import copy
from typing import Any

from spindle.operator.decisions.volume_state import DirReport
from spindle.operator.kube import BROKERS, LOGVOLUMES, PVCS, Resource
from spindle.operator.reconcile import reconcile_broker, refresh_broker
from spindle.operator.specs import BrokerSpec

from .specs.bodies import broker_body

NOW = "2026-11-27T11:00:00Z"
NS = "ns"


class FakeApi:
    """The calls a refresh makes, on a dict of objects; patches recorded and merged."""

    def __init__(self, objects: list[tuple[Resource, dict[str, Any]]]) -> None:
        self.objects = {(r.plural, o["metadata"]["name"]): copy.deepcopy(o) for r, o in objects}
        self.patches: list[tuple[str, str, dict[str, Any]]] = []
        self.created: list[dict[str, Any]] = []

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        found = self.objects.get((resource.plural, name))
        return copy.deepcopy(found) if found is not None else None

    def list(self, resource: Resource, namespace: str | None, selector: str) -> list[Any]:
        def matches(labels: dict[str, str]) -> bool:
            for term in selector.split(","):
                if term.startswith("!"):
                    if term[1:] in labels:
                        return False
                elif "=" in term:
                    key, value = term.split("=", 1)
                    if labels.get(key) != value:
                        return False
                elif term not in labels:
                    return False
            return True

        return [
            copy.deepcopy(o)
            for (plural, _), o in self.objects.items()
            if plural == resource.plural and matches(o["metadata"].get("labels") or {})
        ]

    def create(self, resource: Resource, namespace: str | None, body: Any) -> dict[str, Any]:
        self.created.append(body)
        if "name" in body["metadata"]:  # not an Event (generateName)
            self.objects[(resource.plural, body["metadata"]["name"])] = copy.deepcopy(body)
        return dict(body)

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        return {"items": []}  # the claims' health Events: none

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.patches.append((resource.plural, name, patch))
        obj = self.objects[(resource.plural, name)]
        for key, value in patch.items():
            obj[key] = {**(obj.get(key) or {}), **value}
        return copy.deepcopy(obj)


def _labels(volume_id: int, released: bool) -> dict[str, str]:
    labels = {"spindle.io/broker": "b7", "spindle.io/volume-id": str(volume_id)}
    return {**labels, "spindle.io/released": "true"} if released else labels


def _claim(volume_id: int, size: str, *, released: bool = False) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"data-{volume_id}-b7",
            "namespace": NS,
            "labels": _labels(volume_id, released),
        },
        "spec": {"resources": {"requests": {"storage": size}}, "storageClassName": "fast"},
        "status": {"phase": "Bound", "capacity": {"storage": size}},
    }


def _logvolume(volume_id: int, desired: str, status: dict[str, Any], *, released: bool) -> Any:
    return {
        "metadata": {
            "name": f"b7-data-{volume_id}",
            "namespace": NS,
            "generation": 1,
            "labels": _labels(volume_id, released),
        },
        "spec": {"broker": "b7", "volumeId": volume_id, "desiredState": desired},
        "status": status,
    }


ACTIVE = {"state": "Active", "lastTransitionTime": "2026-11-27T10:00:00Z"}
RELEASED = {
    "state": "Released",
    "claimKept": True,
    "releasedTime": "2026-11-27T10:50:00Z",
    "lastTransitionTime": "2026-11-27T10:50:00Z",
}


def _world(volume_1: dict[str, Any], *, claim_released: bool) -> FakeApi:
    """Broker b7 declares volumes 1 and 0 (``broker_body``); volume 1 was drained, emptied
    and released with its claim kept; the broker still lists both directories."""
    return FakeApi([
        (BROKERS, broker_body()),
        (PVCS, _claim(0, "1Gi")),
        (PVCS, _claim(1, "2Gi", released=claim_released)),
        (LOGVOLUMES, _logvolume(0, "Active", ACTIVE, released=False)),
        (LOGVOLUMES, volume_1),
    ])  # fmt: skip


class Broker:
    """The broker as the probe loop last heard it, and its cordoned.log.dirs."""

    def __init__(self) -> None:
        self.cordoned = ["/var/lib/spindle/data-1"]  # the drain cordoned it; nothing undid it
        self.cordon_calls: list[list[str]] = []

    def probe(self, broker: BrokerSpec) -> list[DirReport]:
        return [
            DirReport(path=f"/var/lib/spindle/data-{v}", error=None, total_bytes=1 << 30,
                      usable_bytes=1 << 29, cordoned=f"/var/lib/spindle/data-{v}" in self.cordoned)
            for v in (0, 1)
        ]  # fmt: skip

    def cordon(self, broker: BrokerSpec, paths: list[str]) -> None:
        self.cordon_calls.append(paths)
        self.cordoned = list(paths)


def _refresh(api: FakeApi, broker: Broker) -> None:
    events: list[tuple[str, str, str]] = []
    refresh_broker(
        api,  # type: ignore[arg-type]
        broker_body(),
        now=NOW,
        emit=lambda *event: events.append(event),
        probe=broker.probe,
        cordon=broker.cordon,
    )


def test_a_refresh_before_the_reattach_leaves_the_released_logvolume_and_its_cordon() -> None:
    released = _logvolume(1, "Drained", RELEASED, released=True)
    api, broker = _world(released, claim_released=True), Broker()
    _refresh(api, broker)
    assert [p for p in api.patches if p[:2] == ("logvolumes", "b7-data-1")] == []
    assert api.objects[("logvolumes", "b7-data-1")]["status"]["state"] == "Released"
    assert broker.cordon_calls == []  # its desiredState is the reattach's to reset first
    # The broker's own volume is observed as usual.
    assert api.objects[("logvolumes", "b7-data-0")]["status"]["state"] == "Active"


def test_once_reattached_the_refresh_shows_the_volume_as_its_reset_spec_says() -> None:
    # What reattach_released leaves: unlabelled, desiredState Active, then state Pending.
    pending = {"state": "Pending", "lastTransitionTime": "2026-11-27T10:59:59Z"}
    api, broker = (
        _world(_logvolume(1, "Active", pending, released=False), claim_released=False),
        Broker(),
    )
    _refresh(api, broker)
    assert broker.cordon_calls == [[]]  # Active again: uncordoned
    status = api.objects[("logvolumes", "b7-data-1")]["status"]
    assert (status["state"], status["cordoned"]) == ("Active", False)


def test_the_reconcile_that_reattaches_shows_the_volume_as_its_reset_spec_says() -> None:
    released = _logvolume(1, "Drained", RELEASED, released=True)
    api, broker = _world(released, claim_released=True), Broker()
    reconcile_broker(
        api,  # type: ignore[arg-type]
        broker_body(),
        now=NOW,
        emit=lambda *event: None,
        probe=broker.probe,
        cordon=broker.cordon,
    )
    logvolume = api.objects[("logvolumes", "b7-data-1")]
    assert logvolume["spec"]["desiredState"] == "Active"
    assert "spindle.io/released" not in logvolume["metadata"]["labels"]
    states = [p[2]["status"]["state"] for p in api.patches
              if p[:2] == ("logvolumes", "b7-data-1") and "state" in p[2].get("status", {})]  # fmt: skip
    assert states == ["Pending", "Active"]  # never Empty nor Cordoned under desiredState Active
    assert broker.cordon_calls == [[]]
    assert logvolume["status"]["cordoned"] is False
