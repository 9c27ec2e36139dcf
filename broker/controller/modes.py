"""Which controller mode a cluster prefix runs in, and who may join it (pure; no I/O).

``spindle.controller.mode=single`` makes a broker its own controller: a one-broker cluster with
nothing to fail over to. Brokers started the way a Kafka user starts them -- ``node.id``,
``listeners``, ``log.dirs``, one etcd and prefix, no Spindle-specific key -- would each run
single under the same prefix: they replicate, show a full ISR, and when a leader dies nothing
moves, because no broker is the cluster's controller. A cluster that looks healthy and cannot
fail over is worse than one that does not start, so the first broker under a prefix records the
mode (``<prefix>/controller_mode``: ``single:<node.id>`` or ``elected``) and a broker whose
mode or id does not fit is refused with the way out.

The lone single-mode broker may restart as ``elected``: that is how a one-broker cluster grows.
"""

from __future__ import annotations

from collections.abc import Iterable

ELECTED = "elected"


def mode_value(mode: str, node_id: int) -> str:
    """The marker this broker writes: ``single:<node.id>`` or ``elected``."""
    return ELECTED if mode == ELECTED else f"single:{node_id}"


def refusal(
    mode: str, node_id: int, recorded: str | None, registered: Iterable[int], prefix: str
) -> str | None:
    """Why this broker may not run ``mode`` under ``prefix``, or None when it may.

    ``recorded`` is the prefix's marker (None: none yet); ``registered`` the broker ids already
    registered under it (a cluster from before the marker existed has only those)."""
    others = sorted(b for b in registered if b != node_id)
    if mode != ELECTED:
        if recorded == ELECTED:
            return (
                f"the brokers under etcd prefix {prefix} run spindle.controller.mode=elected; "
                f"broker {node_id} set to single would never fail over with them: set "
                "spindle.controller.mode=elected"
            )
        owner = _single_owner(recorded)
        if owner is not None and owner != node_id:
            others = sorted({*others, owner})
        if others:
            return (
                f"broker(s) {', '.join(map(str, others))} already registered under etcd prefix "
                f"{prefix}; spindle.controller.mode=single is a one-broker cluster whose leaders "
                "never fail over: set spindle.controller.mode=elected on every broker of a "
                "cluster of several, or give this broker its own spindle.etcd.prefix"
            )
        return None
    owner = _single_owner(recorded)
    if owner is not None and owner != node_id:
        return (
            f"broker {owner} runs etcd prefix {prefix} as a one-broker cluster "
            "(spindle.controller.mode=single, its own controller): restart it with "
            "spindle.controller.mode=elected before adding brokers"
        )
    return None


def _single_owner(recorded: str | None) -> int | None:
    if recorded is None or not recorded.startswith("single:"):
        return None
    return int(recorded.split(":", 1)[1])
