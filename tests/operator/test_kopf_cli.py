"""``kopf run -m spindle.operator`` serves the same operator as ``spindle-operator run``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from controlplane import stop_process_group

pytestmark = pytest.mark.slow


def test_kopf_run_module_reconciles_a_broker(
    spindle_crds: Any,
    helpers: dict[str, Any],
    wait_for: Callable[..., Any],
    tmp_path: Path,
) -> None:
    kopf = Path(sys.executable).with_name("kopf")
    url = f"http://127.0.0.1:{helpers['free_port']()}/healthz"
    with helpers["temporary_namespace"](spindle_crds, "cli") as cluster:
        log_path = tmp_path / "kopf.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                [
                    str(kopf),
                    "run",
                    "-m",
                    "spindle.operator",
                    "--standalone",
                    "--namespace",
                    cluster.namespace,
                    "--liveness",
                    url,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=spindle_crds.env,
                cwd=tmp_path,
                start_new_session=True,
            )
        try:
            wait_for(
                lambda: helpers["healthy"](url) or proc.poll() is not None,
                what="kopf liveness endpoint",
            )
            assert proc.poll() is None, log_path.read_text()[-3000:]
            cluster.apply(
                json.dumps(
                    {
                        "apiVersion": "spindle.io/v1alpha1",
                        "kind": "Broker",
                        "metadata": {"name": "cli"},
                        "spec": {
                            "brokerId": 3,
                            "cluster": "cli",
                            "volumes": [{"id": 0, "size": "1Gi"}],
                        },
                    }
                )
            )
            body = wait_for(
                lambda: (
                    ((b := cluster.get("broker", "cli")) or {}).get("status", {}).get("volumes")
                    and b
                ),
                what=f"status written by kopf run -m (log: {log_path})",
            )
            assert body["status"]["volumes"] == "0/1"
            assert cluster.get("pvc", "data-0-cli") is not None
        finally:
            stop_process_group(proc)
