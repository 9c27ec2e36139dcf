"""``python -m controlplane COMMAND --dir DIR`` (run by scripts/controlplane.sh).

``up [--node]`` starts the cluster and leaves it running in the background; ``down`` stops what
``up`` recorded in DIR (draining and cleaning up the node); ``env`` prints shell ``export`` lines
for KUBECONFIG and PATH; ``status`` exits 0 when running; ``versions`` prints every binary's
version; ``import-image ARCHIVE`` loads an image archive into the node's containerd;
``fail-volume PV MODE`` / ``restore-volume PV MODE`` break or mend one PV's file system;
``load-images`` builds (when missing) and imports Spindle's image and an etcd image, printing
``spindle=<name>`` and ``etcd=<name>``; ``exec -- CMD`` runs CMD on the node with cluster DNS.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from controlplane import images, spindle_image, volumes
from controlplane.binaries import (
    Binaries,
    ControlPlaneError,
    NodeBinaries,
    default_cache,
    iter_versions,
)
from controlplane.local import LocalControlPlane, stop_recorded_cluster
from controlplane.network import NodeNetwork
from controlplane.node import cluster_dns_command, etcd_image
from controlplane.node_config import NodeLayout
from controlplane.processes import read_record, running_server

COMMANDS = [
    "up",
    "exec",
    "load-images",
    "down",
    "env",
    "status",
    "versions",
    "import-image",
    "fail-volume",
    "restore-volume",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="controlplane", description=__doc__)
    parser.add_argument("command", choices=COMMANDS)
    parser.add_argument("args", nargs="*", help="ARCHIVE, or PV MODE")
    parser.add_argument("--dir", type=Path, required=True, help="state dir (certs, data, logs)")
    parser.add_argument("--node", action="store_true", help="up: also start a node")
    parser.add_argument("--timeout", type=float, default=180.0, help="readiness timeout, s")
    return parser


def _layout(state: Path) -> NodeLayout:
    net = NodeNetwork.from_record(read_record(state).get("network"))
    if net is None or running_server(state) is None:
        raise ControlPlaneError(
            f"no node is running in {state} (scripts/controlplane.sh up --node)"
        )
    return NodeLayout(state, net)


def _up(state: Path, args: argparse.Namespace) -> int:
    if (server := running_server(state)) is not None:
        print(f"cluster already running at {server} ({state})", file=sys.stderr)
        return 0
    plane = LocalControlPlane(state, node=args.node, ready_timeout=args.timeout)
    plane.start()
    plane.detach()
    node = f"; node {plane.node_layout.name} Ready" if plane.node_layout else ""
    print(f"control plane up at {plane.server}{node}; KUBECONFIG={plane.kubeconfig}")
    return 0


def _volume(state: Path, command: str, args: list[str]) -> int:
    if len(args) != 2:
        raise ControlPlaneError(f"{command} needs PV MODE (MODE: {', '.join(volumes.Failure)})")
    pv, mode = args
    _layout(state)
    action = volumes.fail if command == "fail-volume" else volumes.restore
    action(state / "volumes", pv, volumes.Failure(mode))
    print(f"{command}: {pv} {mode}")
    return 0


def _load_images(state: Path) -> int:
    layout = _layout(state)
    ctr = NodeBinaries.find().ctr
    spindle = spindle_image.ensure(Path(__file__).resolve().parents[2])
    etcd_archive, etcd_name = etcd_image(Binaries.find().etcd, default_cache() / "images")
    for archive in (etcd_archive, spindle.archive):
        images.import_image(ctr, layout.containerd_socket, archive)
    print(f"spindle={spindle.name}")
    print(f"etcd={etcd_name}")
    return 0


def _down(state: Path, args: argparse.Namespace) -> int:
    stopped = stop_recorded_cluster(state)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def _env(state: Path, args: argparse.Namespace) -> int:
    bin_dir = Binaries.find().bin_dir
    print(f"export KUBECONFIG={shlex.quote(str(state / 'kubeconfig'))}")
    print(f'export PATH={shlex.quote(str(bin_dir))}:"$PATH"')
    return 0


def _status(state: Path, args: argparse.Namespace) -> int:
    server = running_server(state)
    print(f"running at {server}" if server else "not running")
    return 0 if server else 3


def _versions(state: Path, args: argparse.Namespace) -> int:
    node = NodeBinaries.find() if args.node else None
    for name, version in iter_versions(Binaries.find(), node):
        print(f"{name}: {version}")
    return 0


def _exec(state: Path, args: argparse.Namespace) -> int:
    command = cluster_dns_command(_layout(state), args.args)
    os.execvp(command[0], command)


def _import_image(state: Path, args: argparse.Namespace) -> int:
    layout = _layout(state)
    for archive in args.args:
        images.import_image(NodeBinaries.find().ctr, layout.containerd_socket, Path(archive))
    return 0


_COMMANDS: dict[str, Callable[[Path, argparse.Namespace], int]] = {
    "up": _up,
    "down": _down,
    "env": _env,
    "status": _status,
    "versions": _versions,
    "exec": _exec,
    "load-images": lambda state, args: _load_images(state),
    "import-image": _import_image,
}
"""Each subcommand's runner; any other subcommand is a volume operation (``_volume``)."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after "--" is the command `exec` runs, options included.
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    # Intermixed: scripts/controlplane.sh puts --dir before the positional PV MODE or ARCHIVE.
    args = _parser().parse_intermixed_args(argv)
    args.args += command
    state: Path = args.dir.resolve()
    try:
        run = _COMMANDS.get(args.command)
        if run is None:
            return _volume(state, args.command, args.args)
        return run(state, args)
    except (ControlPlaneError, ValueError, OSError) as exc:
        print(f"controlplane {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
