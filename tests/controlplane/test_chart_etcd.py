"""The chart's etcd: one member or three (a StatefulSet whose members find each other through a
headless Service), or the endpoints of an existing etcd; either way the operator is started with
the brokers' etcd client URLs (``--etcd-endpoints``). Rendered with ``helm template``; an upgrade
from an older chart's etcd is tried against the real API server."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import Binaries, LocalControlPlane

CHART = Path(__file__).resolve().parents[2] / "charts" / "spindle"


def render(*values: str) -> list[dict[str, Any]]:
    sets = [a for v in values for a in ("--set", v)]
    done = subprocess.run(
        [str(Binaries.find().helm), "template", "r", str(CHART), "--namespace", "ns", *sets],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def operator_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def etcd_flags(docs: list[dict[str, Any]]) -> dict[str, str]:
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    command = sts["spec"]["template"]["spec"]["containers"][0]["command"]
    return dict(c.removeprefix("--").split("=", 1) for c in command[1:])


def test_one_member_by_default_and_the_operator_knows_its_url() -> None:
    docs = render()
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    assert sts["spec"]["replicas"] == 1
    flags = etcd_flags(docs)
    assert flags["initial-cluster"] == "r-etcd-0=http://r-etcd-0.r-etcd-peers.ns.svc:2380"
    assert "--etcd-endpoints=http://r-etcd-0.r-etcd-peers.ns.svc:2379" in operator_args(docs)


def test_three_members_know_each_other_through_a_headless_service() -> None:
    docs = render("etcd.replicas=3")
    (sts,) = [d for d in docs if d["kind"] == "StatefulSet"]
    assert sts["spec"]["replicas"] == 3
    # Members wait for a quorum before they are ready: they must start together.
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    peers = services[sts["spec"]["serviceName"]]
    assert peers["spec"]["clusterIP"] == "None"
    assert peers["spec"]["publishNotReadyAddresses"] is True
    assert {p["name"] for p in peers["spec"]["ports"]} == {"client", "peer"}
    assert services["r-etcd"]["spec"]["ports"][0]["port"] == 2379
    flags = etcd_flags(docs)
    assert flags["initial-cluster"].split(",") == [
        f"r-etcd-{i}=http://r-etcd-{i}.r-etcd-peers.ns.svc:2380" for i in range(3)
    ]
    assert flags["initial-advertise-peer-urls"] == "http://$(POD_NAME).r-etcd-peers.ns.svc:2380"
    urls = ",".join(f"http://r-etcd-{i}.r-etcd-peers.ns.svc:2379" for i in range(3))
    assert f"--etcd-endpoints={urls}" in operator_args(docs)


@pytest.mark.parametrize("replicas", ["2", "4", "0"])
def test_an_even_or_empty_member_count_is_refused_with_the_reason(replicas: str) -> None:
    done = subprocess.run(
        [
            str(Binaries.find().helm),
            "template",
            "r",
            str(CHART),
            "--set",
            f"etcd.replicas={replicas}",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert f"etcd.replicas must be 1, 3 or 5 (an odd quorum), got {replicas}" in done.stderr


def test_an_existing_etcd_is_used_by_its_endpoints() -> None:
    docs = render("etcd.enabled=false", "etcd.endpoints={http://e0:2379,http://e1:2379}")
    assert not [d for d in docs if "etcd" in d["metadata"]["name"]]
    assert "--etcd-endpoints=http://e0:2379,http://e1:2379" in operator_args(docs)
    # Neither: the Brokers name spindle.etcd.endpoints themselves.
    none = render("etcd.enabled=false")
    assert not [a for a in operator_args(none) if a.startswith("--etcd-endpoints")]


def test_helm_lint_strict_passes_for_each_etcd_shape() -> None:
    helm = Binaries.find().helm
    for values in (
        ["--set", "etcd.replicas=3"],
        ["--set", "etcd.enabled=false", "--set", "etcd.endpoints={http://e0:2379}"],
    ):
        lint = subprocess.run(
            [str(helm), "lint", "--strict", str(CHART), *values], capture_output=True, text=True
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr


def older_chart(tmp: Path) -> Path:
    """This chart as charts before the headless peers Service made it: the etcd StatefulSet
    governed by the client Service ``<release>-etcd`` (350fd82)."""
    old = tmp / "spindle"
    shutil.copytree(CHART, old)
    template = old / "templates" / "etcd.yaml"
    text = template.read_text()
    assert "  serviceName: {{ $peers }}\n" in text
    template.write_text(
        text.replace("  serviceName: {{ $peers }}\n", "  serviceName: {{ $name }}\n")
    )
    return old


def test_an_upgrade_over_an_older_charts_etcd_is_refused_with_the_way_through(
    kube: LocalControlPlane, tmp_path: Path
) -> None:
    """Without the check, helm upgrade stops half-way at the API server's "Forbidden: updates
    to statefulset spec"; with it nothing is applied, the message says what to run, and after
    that the upgrade goes through on the same claim."""
    release, namespace = "up", f"up-{uuid.uuid4().hex[:6]}"
    kube.helm("install", release, str(older_chart(tmp_path)), "--namespace", namespace,
              "--create-namespace")  # fmt: skip
    try:
        claim = f"data-{release}-etcd-0"

        def claim_uid() -> str:
            got = kube.kubectl("get", "pvc", "-n", namespace, claim, "-o", "json", check=False)
            return str(json.loads(got.stdout)["metadata"]["uid"]) if got.returncode == 0 else ""

        deadline = time.monotonic() + 60
        while not (before := claim_uid()):  # made by the StatefulSet controller
            assert time.monotonic() < deadline, f"no claim {claim}"
            time.sleep(0.5)
        refused = kube.helm("upgrade", release, str(CHART), "--namespace", namespace, check=False)
        assert refused.returncode != 0
        assert "was made by an older chart (serviceName up-etcd" in refused.stderr
        assert f"kubectl delete statefulset up-etcd -n {namespace} --cascade=orphan" in (
            refused.stderr
        )
        assert "Forbidden" not in refused.stderr
        kube.kubectl("delete", "statefulset", "up-etcd", "-n", namespace, "--cascade=orphan")
        kube.helm("upgrade", release, str(CHART), "--namespace", namespace)
        sts = json.loads(
            kube.kubectl("get", "statefulset", "up-etcd", "-n", namespace, "-o", "json").stdout
        )
        assert sts["spec"]["serviceName"] == "up-etcd-peers"
        assert claim_uid() == before
        # A member count cannot change under a running etcd either.
        grown = kube.helm("upgrade", release, str(CHART), "--namespace", namespace,
                          "--set", "etcd.replicas=3", check=False)  # fmt: skip
        assert grown.returncode != 0
        assert "etcd.replicas cannot change from 1 to 3 on a running etcd" in grown.stderr
    finally:
        kube.helm("uninstall", release, "--namespace", namespace, check=False)
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
