"""A storage engine in a child process, driven by JSON lines on stdin (fault and crash tests).

Run as ``python storage_child.py CONFIG_JSON``; CONFIG has ``dirs``, ``settings`` (Kafka keys),
and optionally ``pause_at`` (a mover step name) and ``pause_count`` (pause at the n-th time the
step is reached): there the child prints ``{"paused": step}`` and blocks forever, so the parent
can SIGKILL it at exactly that point. Each command line gets one JSON answer line.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from spindle.broker.common.errors import KafkaError
from spindle.broker.common.ids import TopicPartition
from spindle.broker.records.batch import build_batch, validate
from spindle.broker.storage import LogManager, StorageSettings

_out_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main() -> None:
    config = json.loads(sys.argv[1])
    pause_at = config.get("pause_at")
    pause_count = int(config.get("pause_count", 1))
    seen = {"n": 0}

    def hook(step: str, tp: TopicPartition) -> None:
        if step == pause_at:
            seen["n"] += 1
            if seen["n"] >= pause_count:
                emit({"paused": step, "tp": str(tp)})
                while True:
                    time.sleep(60)

    settings = StorageSettings.model_validate(
        {"log.dirs": config["dirs"], **config.get("settings", {})}
    )
    lm = LogManager.open(
        settings,
        cluster_id=config.get("cluster_id", "test-cluster"),
        node_id=int(config.get("node_id", 1)),
        hook=hook,
        background=False,
    )
    listener_calls: list[str] = []
    lm.add_offline_listener(listener_calls.append)
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd["op"]
        tp = TopicPartition(cmd["tp"][0], cmd["tp"][1]) if "tp" in cmd else None
        try:
            if op == "create":
                assert tp is not None
                if cmd.get("dir"):
                    lm.change_replica_dir(tp, cmd["dir"])
                log = lm.get_or_create_log(tp)
                emit({"ok": True, "dir": log.logdir_path})
            elif op == "append":
                assert tp is not None
                log = lm.get_log(tp)
                assert log is not None
                values = [v.encode() for v in cmd["values"]]
                r = log.append(build_batch(values, timestamp_ms=1_700_000_000_000))
                emit({"ok": True, "base": r.base_offset, "last": r.last_offset})
            elif op == "read_all":
                assert tp is not None
                log = lm.get_log(tp)
                assert log is not None
                data = b""
                offset = log.log_start_offset
                while offset < log.log_end_offset:
                    chunk = log.read(offset, 1 << 20).records
                    data += chunk
                    offset = validate(chunk)[-1].next_offset
                emit({"ok": True, "hex": data.hex()})
            elif op == "move":
                assert tp is not None
                emit({"ok": True, "code": lm.change_replica_dir(tp, cmd["dir"]).name})
            elif op == "await_idle":
                emit({"ok": lm.await_idle(60)})
            elif op == "state":
                emit(
                    {
                        "ok": True,
                        "offline_dirs": lm.offline_dirs,
                        "listener_calls": listener_calls,
                        "offline_log_directory_count": lm.offline_log_directory_count,
                        "offline_replica_count": lm.offline_replica_count,
                        "errors": {d.path: d.error.name for d in lm.describe_dirs()},
                    }
                )
            elif op == "close":
                lm.close()
                emit({"ok": True})
                return
            else:
                emit({"ok": False, "error": "BAD_COMMAND", "message": op})
        except KafkaError as exc:
            emit({"ok": False, "error": exc.code.name, "message": str(exc)})


if __name__ == "__main__":
    main()
