"""A prefix runs one controller mode: a second broker cannot silently join a one-broker
(``single``) cluster, whose leaders would never fail over, nor a single one join an elected
cluster; the lone single broker may grow up into ``elected``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from spindle.broker.controller.modes import refusal

from ..conftest import Broker, Etcd, make_broker

P = "/spindle/c"


def test_a_single_broker_owns_its_prefix_alone() -> None:
    assert refusal("single", 1, None, [], P) is None
    assert refusal("single", 1, "single:1", [1], P) is None  # its own restart
    why = refusal("single", 2, "single:1", [1], P)
    assert why is not None
    assert "broker(s) 1 already registered" in why
    assert "spindle.controller.mode=elected" in why
    # A prefix from before the marker: the registrations tell.
    assert refusal("single", 2, None, [1, 3], P) is not None
    why = refusal("single", 1, "elected", [1, 2], P)
    assert why is not None
    assert "run spindle.controller.mode=elected" in why


def test_elected_brokers_join_each_other_but_not_someone_elses_single_cluster() -> None:
    assert refusal("elected", 2, None, [], P) is None
    assert refusal("elected", 2, "elected", [1], P) is None
    assert refusal("elected", 1, "single:1", [1], P) is None  # the lone broker grows up
    why = refusal("elected", 2, "single:1", [1], P)
    assert why is not None
    assert "broker 1 runs etcd prefix /spindle/c as a one-broker" in why


def _start_refused(broker: Broker) -> str:
    """Run ``broker`` to its exit; its stderr (it must be refused at start-up)."""
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "spindle.broker", "--config", str(broker.config)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    return proc.stderr


def _same_prefix(first: Broker, second: Broker) -> None:
    second.config.write_text(
        second.config.read_text().replace(second.etcd_prefix, first.etcd_prefix)
    )


@pytest.mark.parametrize("second_mode", ["single", "elected"])
def test_a_second_broker_under_a_single_brokers_prefix_is_refused_and_the_first_serves_on(
    tmp_path: Path, etcd: Etcd, second_mode: str
) -> None:
    # What a Kafka user writes: node.id, listeners, log.dirs, one etcd prefix, no mode key.
    first = make_broker(tmp_path / "b1", etcd, dirs=1, node_id=1)
    second = make_broker(
        tmp_path / "b2", etcd, dirs=1, node_id=2, extra={"spindle.controller.mode": second_mode}
    )
    _same_prefix(first, second)
    first.start()
    try:
        err = _start_refused(second)
        if second_mode == "single":
            assert "broker(s) 1 already registered under etcd prefix" in err
        else:
            assert "broker 1 runs etcd prefix" in err
        assert "restart it with spindle.controller.mode=elected" in err or (
            "set spindle.controller.mode=elected on every broker" in err
        )
        assert not list(Path(second.log_dirs[0]).glob("*-*"))  # it created no replica
        assert first.proc is not None
        assert first.proc.poll() is None
    finally:
        first.stop()


def test_a_single_broker_restarted_as_elected_lets_a_second_broker_join(
    tmp_path: Path, etcd: Etcd
) -> None:
    first = make_broker(tmp_path / "b1", etcd, dirs=1, node_id=1)
    first.start()
    first.stop()
    elected = "spindle.controller.mode=elected\n"
    first.config.write_text(first.config.read_text() + elected)
    second = make_broker(tmp_path / "b2", etcd, dirs=1, node_id=2)
    _same_prefix(first, second)
    single_again = make_broker(tmp_path / "b3", etcd, dirs=1, node_id=3)
    _same_prefix(first, single_again)
    second.config.write_text(second.config.read_text() + elected)
    first.start()
    try:
        second.start()
        second.stop()
        assert "run spindle.controller.mode=elected" in _start_refused(single_again)
    finally:
        first.stop()
