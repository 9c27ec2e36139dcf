"""The operator reads each directory's id from its broker's registration in etcd
(``spindle.operator.registry``): parsing, and backing off from an etcd that does not answer.
The read from a real broker's registration is proven in
tests/operator/volumes/test_logvolume_status.py (the ids of the directories' meta.properties)."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from spindle.broker.controller.model import BrokerRegistration
from spindle.broker.controller.session import BrokerLifecycle
from spindle.operator import registry


def test_a_registration_gives_each_path_its_directory_id() -> None:
    record = {
        "node_id": 1,
        "directories": ["AAAAAAAAAAAAAAAAAAAAAQ", "BBBBBBBBBBBBBBBBBBBBBQ"],
        "directory_paths": {"AAAAAAAAAAAAAAAAAAAAAQ": "/d/0", "BBBBBBBBBBBBBBBBBBBBBQ": "/d/1"},
    }
    assert registry.directory_ids_by_path(json.dumps(record).encode()) == {
        "/d/0": "AAAAAAAAAAAAAAAAAAAAAQ",
        "/d/1": "BBBBBBBBBBBBBBBBBBBBBQ",
    }
    # A broker that does not write paths: no ids, not an error.
    assert registry.directory_ids_by_path(b'{"node_id": 1, "directories": ["x"]}') == {}
    with pytest.raises(ValueError, match="not a mapping"):
        registry.directory_ids_by_path(b'{"directory_paths": ["x"]}')


def test_the_key_is_the_brokers_own_registration_key() -> None:
    assert registry.registration_key("/spindle/demo/", 3) == b"/spindle/demo/brokers/3"
    # The broker registers under the contract's key, and its record reads back by it.
    lifecycle = BrokerLifecycle(
        None,  # type: ignore[arg-type]  # only stored: nothing is sent here
        prefix="/spindle/demo/",
        registration=BrokerRegistration(3, "h", 9092, None, ["A"], {"A": "/d/0"}),
    )
    assert lifecycle.reg_key == registry.registration_key("/spindle/demo/", 3)
    assert registry.directory_ids_by_path(lifecycle.registration.to_json()) == {"/d/0": "A"}


def test_an_etcd_nobody_listens_on_is_reported_with_where_it_was_asked() -> None:
    with socket.socket() as s:  # a port that refuses: bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(registry.RegistryUnavailable, match=f"{url}/v3/kv/range"):
            registry.directory_ids([url], "/p", 1, timeout=1)
    with pytest.raises(registry.RegistryUnavailable, match="no etcd endpoints"):
        registry.directory_ids([], "/p", 1)


def test_the_reader_backs_off_from_a_failed_read_and_reads_every_time_once_it_works() -> None:
    now = [0.0]
    calls: list[tuple[Any, ...]] = []
    answers: list[dict[str, str] | Exception] = [
        registry.RegistryUnavailable("down"),
        {"/d/0": "A"},
        {"/d/0": "B"},
    ]

    def read(*args: Any, timeout: float) -> dict[str, str]:
        calls.append(args)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    reader = registry.DirectoryIdReader(backoff=30, clock=lambda: now[0], read=read)
    ids, error = reader.read_or_error(["http://e"], "/p", 1)
    assert ids is None
    assert isinstance(error, registry.RegistryUnavailable)
    now[0] = 29.0
    assert reader.read_or_error(["http://e"], "/p", 1) == (None, None)  # not asked
    assert len(calls) == 1
    now[0] = 30.0
    assert reader.read_or_error(["http://e"], "/p", 1) == ({"/d/0": "A"}, None)
    # Not cached: a restarted broker's new id shows on the next probe.
    assert reader.read_or_error(["http://e"], "/p", 1) == ({"/d/0": "B"}, None)
    assert len(calls) == 3
