"""``spindle-broker --config FILE`` (also ``python -P -m spindle.broker``): run one broker until
SIGTERM or SIGINT, then shut down cleanly (storage writes its clean-shutdown marker)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from pathlib import Path

from spindle.broker.common.errors import KafkaError
from spindle.broker.common.properties import parse_properties
from spindle.broker.controller.etcd import EtcdError
from spindle.broker.storage import StorageStartupError

from .app import BrokerServer
from .config import ConfigError, load_config


async def _run(config_path: str) -> int:
    broker_settings, storage_settings = load_config(config_path)
    static = parse_properties(Path(config_path).read_text(encoding="utf-8"))  # noqa: ASYNC240
    server = BrokerServer(broker_settings, storage_settings, static_configs=static)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await server.start()
    except BaseException:
        await server.stop()
        raise
    settle_heap()
    print(f"spindle-broker {broker_settings.node_id} started on port {server.port}", flush=True)
    waits = [asyncio.create_task(stop.wait()), asyncio.create_task(server.fatal.wait())]
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for task in waits:
        task.cancel()
    if server.fatal.is_set():
        print(f"spindle-broker: {server.fatal_reason}", file=sys.stderr, flush=True)
        await server.stop()
        return 1
    logging.getLogger(__name__).info("signal received: shutting down")
    await server.stop()
    return 0


def settle_heap() -> None:
    """Move everything alive after start-up out of the garbage collector's generations.

    Imports, schemas, settings and the broker's own objects live as long as the process
    (~65K objects), yet every full collection walked them all: profiled under the produce
    benchmark, the collector took ~7% of the broker's CPU, and a full pass blocks the event
    loop for tens of milliseconds (more on a loaded machine), one source of round-to-round
    spread. ``gc.freeze()`` leaves them alone (cycles among them are never freed, and there
    are none worth freeing); what requests allocate is collected as before.
    """
    gc.collect()
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spindle-broker", description=__doc__)
    parser.add_argument("--config", required=True, help="Kafka-style .properties file")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stderr,
    )
    try:
        return asyncio.run(_run(args.config))
    except ConfigError as exc:
        print(f"spindle-broker: {exc}", file=sys.stderr)
        return 2
    except (EtcdError, StorageStartupError, KafkaError) as exc:
        print(f"spindle-broker: cannot start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
