"""API paths: namespaced kinds live under their namespace, cluster-scoped kinds
(PersistentVolumes) under none, and mixing the two up is refused instead of sent."""

from __future__ import annotations

import pytest
from spindle.operator.kube import BROKERS, PERSISTENTVOLUMES, PODS, RESOURCES_BY_KIND


def test_namespaced_paths_carry_the_namespace_and_subresource() -> None:
    assert PODS.path("ns") == "/api/v1/namespaces/ns/pods"
    assert BROKERS.path("ns", "b0", "status") == (
        "/apis/spindle.io/v1alpha1/namespaces/ns/brokers/b0/status"
    )


def test_cluster_scoped_paths_have_no_namespace() -> None:
    assert PERSISTENTVOLUMES.path(None) == "/api/v1/persistentvolumes"
    assert PERSISTENTVOLUMES.path(None, "pv-1") == "/api/v1/persistentvolumes/pv-1"
    assert RESOURCES_BY_KIND["PersistentVolume"] is PERSISTENTVOLUMES


def test_a_namespace_where_none_belongs_or_none_where_one_does_is_refused() -> None:
    with pytest.raises(ValueError, match="cluster-scoped"):
        PERSISTENTVOLUMES.path("ns", "pv-1")
    with pytest.raises(ValueError, match="namespaced"):
        PODS.path(None, "p")
