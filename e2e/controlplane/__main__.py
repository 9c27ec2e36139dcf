"""``python -m controlplane up|down|env|status [--dir DIR]`` (run by scripts/controlplane.sh).

``up`` starts the control plane and leaves it running in the background; ``down`` stops what
``up`` recorded in DIR; ``env`` prints shell ``export`` lines for KUBECONFIG and PATH.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from controlplane.local import (
    Binaries,
    ControlPlaneError,
    LocalControlPlane,
    iter_versions,
    running_server,
    stop_recorded,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="controlplane", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "env", "status", "versions"])
    parser.add_argument("--dir", type=Path, required=True, help="state dir (certs, data, logs)")
    parser.add_argument("--timeout", type=float, default=180.0, help="readiness timeout, s")
    args = parser.parse_args(argv)
    state: Path = args.dir.resolve()
    try:
        if args.command == "up":
            if (server := running_server(state)) is not None:
                print(f"control plane already running at {server} ({state})", file=sys.stderr)
                return 0
            plane = LocalControlPlane(state, ready_timeout=args.timeout)
            plane.start()
            plane.detach()
            print(f"control plane up at {plane.server}; KUBECONFIG={plane.kubeconfig}")
        elif args.command == "down":
            stopped = stop_recorded(state)
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        elif args.command == "env":
            bin_dir = Binaries.find().bin_dir
            print(f"export KUBECONFIG={shlex.quote(str(state / 'kubeconfig'))}")
            print(f'export PATH={shlex.quote(str(bin_dir))}:"$PATH"')
        elif args.command == "status":
            server = running_server(state)
            print(f"running at {server}" if server else "not running")
            return 0 if server else 3
        else:
            for name, version in iter_versions(Binaries.find()):
                print(f"{name}: {version}")
    except ControlPlaneError as exc:
        print(f"controlplane {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
