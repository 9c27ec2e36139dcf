"""Prometheus text metrics and a health check over HTTP (aiohttp), for operators and probes.

Kafka's own JBOD metric names (``kafka.log:type=LogManager,name=OfflineLogDirectoryCount``,
``LogDirectoryOffline``, ``kafka.server:type=ReplicaManager,name=OfflineReplicaCount``) are kept,
flattened the way the JMX exporter does, plus per-directory bytes and move progress.
:func:`render_metrics` is pure; :class:`MetricsServer` only serves it.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiohttp import web
from spindle.broker.storage import LogDirDescription, LogManager


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(
    dirs: Sequence[LogDirDescription], *, offline_replicas: int, node_id: int
) -> str:
    """The exposition text for one broker's directories and replicas."""
    offline_dirs = [d for d in dirs if int(d.error)]
    lines = [
        "# HELP kafka_log_logmanager_offlinelogdirectorycount Log directories that are offline.",
        "# TYPE kafka_log_logmanager_offlinelogdirectorycount gauge",
        f'kafka_log_logmanager_offlinelogdirectorycount{{broker="{node_id}"}} {len(offline_dirs)}',
        "# HELP kafka_log_logmanager_logdirectoryoffline 1 if the log directory is offline.",
        "# TYPE kafka_log_logmanager_logdirectoryoffline gauge",
    ]
    for d in dirs:
        lines.append(
            f'kafka_log_logmanager_logdirectoryoffline{{logDirectory="{_label(d.path)}"}} '
            f"{1 if int(d.error) else 0}"
        )
    lines += [
        "# HELP kafka_server_replicamanager_offlinereplicacount Replicas in offline directories.",
        "# TYPE kafka_server_replicamanager_offlinereplicacount gauge",
        f'kafka_server_replicamanager_offlinereplicacount{{broker="{node_id}"}} {offline_replicas}',
        "# HELP spindle_log_dir_bytes Total and usable bytes of each online log directory.",
        "# TYPE spindle_log_dir_bytes gauge",
    ]
    for d in dirs:
        if not int(d.error):
            p = _label(d.path)
            lines.append(
                f'spindle_log_dir_bytes{{logDirectory="{p}",kind="total"}} {d.total_bytes}'
            )
            lines.append(
                f'spindle_log_dir_bytes{{logDirectory="{p}",kind="usable"}} {d.usable_bytes}'
            )
    lines += [
        "# HELP spindle_log_dir_replicas Replicas (live and future) per log directory.",
        "# TYPE spindle_log_dir_replicas gauge",
    ]
    for d in dirs:
        live = sum(1 for r in d.partitions if not r.is_future)
        future = sum(1 for r in d.partitions if r.is_future)
        p = _label(d.path)
        lines.append(f'spindle_log_dir_replicas{{logDirectory="{p}",future="false"}} {live}')
        lines.append(f'spindle_log_dir_replicas{{logDirectory="{p}",future="true"}} {future}')
    lines += [
        "# HELP spindle_replica_move_offset_lag Offsets a future replica still has to copy.",
        "# TYPE spindle_replica_move_offset_lag gauge",
    ]
    for d in dirs:
        for r in d.partitions:
            if r.is_future:
                lines.append(
                    f'spindle_replica_move_offset_lag{{topic="{_label(r.tp.topic)}",'
                    f'partition="{r.tp.partition}",logDirectory="{_label(d.path)}"}} {r.offset_lag}'
                )
    return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves ``/metrics`` (Prometheus text) and ``/health`` (200 while a dir is online)."""

    def __init__(self, logs: LogManager, *, node_id: int) -> None:
        self._logs = logs
        self._node_id = node_id
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        text = render_metrics(
            self._logs.describe_dirs(),
            offline_replicas=self._logs.offline_replica_count,
            node_id=self._node_id,
        )
        return web.Response(text=text, content_type="text/plain", charset="utf-8")

    async def _health(self, request: web.Request) -> web.Response:
        online = self._logs.online_dirs
        status = 200 if online else 503
        return web.Response(
            status=status,
            text=f"{len(online)} of {len(self._logs.describe_dirs())} log dirs online\n",
        )
