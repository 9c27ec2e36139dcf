"""The planner's entry point under Spark's own ``spark-submit`` (the one the pyspark wheel
ships): ``spark-submit --master local[1] <installed spindle/rebalance/cli.py> plan ...`` writes
the same plan, byte for byte, as the ``spindle-rebalance`` console script, and Spark's event
log shows the run was the submitted application running jobs on that master, not a fallback.

The console script runs with ``--no-spark`` (numpy preparation): the comparison then also says
that Spark's preparation under spark-submit and the numpy one give the same plan, and costs one
Spark start-up instead of two (the console script with Spark is run by
tests/rebalance/test_spark_and_cli.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import spindle.rebalance.cli

pytestmark = pytest.mark.slow

VENV_BIN = Path(sys.executable).parent


def _spark_submit() -> str:
    path = VENV_BIN / "spark-submit"
    if not path.exists():
        pytest.fail(f"{path} is missing: pyspark is a dependency, run ./dev sync")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.fail("no java on PATH and no JAVA_HOME: spark-submit needs a JVM (./dev sync)")
    return str(path)


@dataclass
class Runs:
    console: subprocess.CompletedProcess[str]
    console_plan: bytes
    submitted: subprocess.CompletedProcess[str]
    submit_plan: bytes
    #: Spark's event log of the submitted application, one JSON record per line.
    events: list[dict[str, Any]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """One snapshot planned twice: by the console script, and by spark-submit of cli.py."""
    tmp_path = tmp_path_factory.mktemp("spark-submit")
    console = str(VENV_BIN / "spindle-rebalance")
    snap = tmp_path / "snapshot.json"
    subprocess.run(
        [console, "generate", "--brokers", "6", "--disks", "2", "--replicas", "300",
         "--racks", "3", "--draining-dirs", "1", "--seed", "3", "--output", str(snap)],
        check=True, timeout=120,
    )  # fmt: skip
    by_console, by_submit = tmp_path / "console-plan.json", tmp_path / "submit-plan.json"
    done = subprocess.run(
        [console, "plan", "--snapshot", str(snap), "--mode", "full", "--output", str(by_console),
         "--no-spark"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    cli_py = Path(spindle.rebalance.cli.__file__)
    assert cli_py.name == "cli.py"
    events = tmp_path / "spark-events"
    events.mkdir()
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    submitted = subprocess.run(
        # The JVM flags only make a short job start faster (C1 JIT only, serial GC: about half
        # the CPU on this 2-core machine), as the Kafka tool wrappers do.
        [_spark_submit(), "--master", "local[1]",
         "--driver-java-options", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}",
         "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
         str(cli_py), "plan", "--snapshot", str(snap), "--mode", "full",
         "--output", str(by_submit)],
        capture_output=True, text=True, timeout=300, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr[-4000:]
    [log] = events.iterdir()
    return Runs(
        console=done,
        console_plan=by_console.read_bytes(),
        submitted=submitted,
        submit_plan=by_submit.read_bytes(),
        events=[json.loads(line) for line in log.read_text().splitlines()],
    )


def test_spark_submit_runs_the_cli_and_writes_the_console_scripts_plan(runs: Runs) -> None:
    assert runs.submit_plan == runs.console_plan
    assert json.loads(runs.submit_plan)["partitions"], "a plan with moves says something"
    # spark-submit passes the driver's stderr on through its stdout; the planner's lines (the
    # summary, then each goal left out of band with its status) are there, in order.
    lines = runs.console.stdout.splitlines()
    assert lines[0].startswith("planned ")
    submitted = runs.submitted.stdout.splitlines()
    assert [line for line in submitted if line in lines] == lines, runs.submitted.stdout
    # Spark's event log: the planner's application, and Spark jobs ran and succeeded.
    [env_update] = [r for r in runs.events if r["Event"] == "SparkListenerEnvironmentUpdate"]
    assert env_update["Spark Properties"]["spark.app.name"] == "spindle-rebalance"
    jobs = [r for r in runs.events if r["Event"] == "SparkListenerJobEnd"]
    assert jobs
    assert all(j["Job Result"]["Result"] == "JobSucceeded" for j in jobs)


def test_spark_submit_master_is_the_master_the_planner_runs_on(runs: Runs) -> None:
    [env_update] = [r for r in runs.events if r["Event"] == "SparkListenerEnvironmentUpdate"]
    assert env_update["Spark Properties"]["spark.master"] == "local[1]"
