"""``spindle-operator run``: serve the operator against the current kubeconfig (or in-cluster).

A thin front over ``kopf.run`` with the options a Spindle deployment needs; ``kopf run -m
spindle.operator`` works too. Standalone by default (one replica; no KopfPeering CRD needed).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import kopf
import spindle.operator  # noqa: F401  (registers the handlers)
from spindle.operator import metrics
from spindle.operator.dashboard import DashboardSettings, parse_listen
from spindle.operator.dashboard.hooks import register as serve_dashboard
from spindle.operator.decisions.remediation_settings import RemediationError, RemediationSettings
from spindle.operator.specs.broker import REMEDIATION_POLICIES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="spindle-operator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the operator until interrupted")
    scope = run.add_mutually_exclusive_group()
    scope.add_argument(
        "-n", "--namespace", action="append", default=[], help="serve this namespace (repeatable)"
    )
    scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="serve every namespace (default)"
    )
    run.add_argument("--peering", metavar="NAME", help="coordinate replicas via a KopfPeering")
    run.add_argument("--liveness", metavar="URL", help="e.g. http://0.0.0.0:8080/healthz")
    run.add_argument(
        "--bootstrap",
        metavar="CLUSTER=HOST:PORT[,HOST:PORT]",
        action="append",
        default=[],
        help="reach this cluster's brokers here instead of through their Services (repeatable)",
    )
    run.add_argument(
        "--planner-image",
        metavar="IMAGE",
        default="spindle:latest",
        help="image of the Rebalance planner's Pods (Spark driver and executors too)",
    )
    run.add_argument(
        "--etcd-endpoints",
        metavar="URL[,URL]",
        help="spindle.etcd.endpoints of every Broker whose spec.config names none (the chart "
        "passes its etcd's members, or etcd.endpoints)",
    )
    run.add_argument(
        "--probe-period",
        metavar="SECONDS",
        type=float,
        default=2.0,
        help="how often each broker's log directories are described (LogVolume status)",
    )
    run.add_argument(
        "--remediation-policy",
        choices=list(REMEDIATION_POLICIES),
        default="Auto",
        help="what to do about a failed log directory when its Broker names no "
        "spec.remediation.policy (Auto: ReplaceVolume when every partition in it has an "
        "in-sync replica elsewhere, else report)",
    )
    run.add_argument(
        "--remediation-max-failures",
        metavar="N",
        type=int,
        default=2,
        help="failures of one volume within --remediation-window after which it is left Offline",
    )
    run.add_argument(
        "--remediation-window",
        metavar="SECONDS",
        type=float,
        default=3600.0,
        help="the cool-down window of --remediation-max-failures",
    )
    run.add_argument(
        "--remediation-replace-timeout",
        metavar="SECONDS",
        type=float,
        default=900.0,
        help="how long a ReplaceVolume may stay Replacing before it is given up as Failed",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    run.add_argument(
        "--dashboard", metavar="HOST:PORT", help="serve the dashboard, e.g. 0.0.0.0:8081"
    )
    run.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve the operator's Prometheus metrics on /metrics, e.g. 0.0.0.0:8082",
    )
    run.add_argument(
        "--dashboard-read",
        choices=["open", "authenticated"],
        default="authenticated",
        help="whether viewing the dashboard needs a token (actions always do)",
    )
    run.add_argument(
        "--dashboard-secure-cookies",
        action="store_true",
        help="mark the dashboard's session cookie Secure (served over HTTPS, e.g. a TLS Ingress)",
    )
    return parser


def _config_defaults(parser: argparse.ArgumentParser, endpoints: str | None) -> dict[str, str]:
    """Broker settings given to every Broker whose ``spec.config`` does not set them."""
    if endpoints is None:
        return {}
    urls = [u.strip() for u in endpoints.split(",") if u.strip()]
    bad = [u for u in urls if not u.startswith(("http://", "https://"))]
    if not urls or bad:
        parser.error(
            f"--etcd-endpoints expects etcd client URLs (http://HOST:PORT,...), got {endpoints!r}"
        )
    return {"spindle.etcd.endpoints": ",".join(urls)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.dashboard:
        try:
            host, port = parse_listen(args.dashboard)
        except ValueError as exc:
            parser.error(str(exc))
        serve_dashboard(
            DashboardSettings(
                host=host,
                port=port,
                read_access=args.dashboard_read,
                namespaces=tuple(args.namespace),
                secure_cookies=args.dashboard_secure_cookies,
            )
        )
    if args.metrics:
        try:
            host, port = parse_listen(args.metrics)
        except ValueError:
            parser.error(
                f"--metrics expects HOST:PORT (for example 0.0.0.0:8082), got {args.metrics!r}"
            )
        metrics.register_server(host, port)
    bootstrap = {}
    for item in args.bootstrap:
        cluster, sep, servers = item.partition("=")
        if not sep or not cluster or not servers:
            parser.error(f"--bootstrap wants CLUSTER=HOST:PORT, got {item!r}")
        bootstrap[cluster] = servers
    if args.probe_period <= 0:
        parser.error("--probe-period must be positive")
    try:
        remediation = RemediationSettings(
            default_policy=args.remediation_policy,
            max_failures=args.remediation_max_failures,
            window_seconds=args.remediation_window,
            replace_timeout_seconds=args.remediation_replace_timeout,
        )
    except RemediationError as exc:
        parser.error(str(exc))
    kopf.run(
        memo=kopf.Memo(
            bootstrap=bootstrap,
            planner_image=args.planner_image,
            probe_period=args.probe_period,
            remediation=remediation,
            config_defaults=_config_defaults(parser, args.etcd_endpoints),
        ),
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        standalone=args.peering is None,
        peering_name=args.peering,
        liveness_endpoint=args.liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
