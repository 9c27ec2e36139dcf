"""A broker's registration record in the cluster's etcd, as far as anyone outside the broker
may read it: the key layout and the one field the operator relies on. The contract between the
broker, which writes the record (``controller.session`` under this key, the value
``controller.model.BrokerRegistration``), and the operator, which reads each log directory's
id from it (``spindle.operator.registry``) -- the only module of the broker the operator may
import besides the rest of ``common`` (import-linter).

Why a record and not a Kafka API: a LogVolume shows its directory's KIP-858 ``directory.id``,
and no Kafka API pairs an id with a path (DescribeLogDirs answers paths and no ids, a broker's
KIP-858 registration ids and no paths). So each Spindle broker writes its directories' paths
beside their ids in its registration, rewritten every time it starts (a replaced, empty
directory registers its new id)::

    <spindle.etcd.prefix>/brokers/<node.id>   {"node_id": ..., "directories": [id, ...],
                                               "directory_paths": {id: path, ...}, ...}

Pure: no I/O, nothing else of the broker.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

#: The broker's default ``spindle.etcd.prefix`` (``server.config``), for a Broker whose config
#: does not set it.
DEFAULT_PREFIX = "/spindle/cluster"
#: The record's field mapping each directory id to its ``log.dirs`` path.
DIRECTORY_PATHS = "directory_paths"


def registration_key(prefix: str, node_id: int) -> bytes:
    """Where broker ``node_id`` registers under the cluster's ``prefix``."""
    return f"{prefix.rstrip('/')}/brokers/{node_id}".encode()


def directory_ids_by_path(value: bytes) -> dict[str, str]:
    """path -> directory id from a registration record's JSON. A record from a broker that
    does not write paths gives nothing; a malformed one raises ``ValueError``."""
    data = json.loads(value)
    paths = data.get(DIRECTORY_PATHS) or {}
    if not isinstance(paths, Mapping):
        raise ValueError(f"{DIRECTORY_PATHS} is {type(paths).__name__}, not a mapping")
    return {str(path): str(dir_id) for dir_id, path in paths.items()}
