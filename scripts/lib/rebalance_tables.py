"""The main job's tables for a Rebalance (scripts/main-job.sh, step 9), from JSON on stdin.

  kubectl get rebalance R -o json | python -P scripts/lib/rebalance_tables.py proposal
  kubectl get logvolumes -o json | python -P scripts/lib/rebalance_tables.py volumes BEFORE.json BROKER...

``proposal`` prints ``status.proposal`` as a newcomer reads it: the summary line, each log
directory's bytes and utilisation before -> after (the directories the plan changes first),
the moves (partition, broker, from directory -> to directory, bytes) and each goal's status.
The raw JSON runs to thousands of characters even for nine directories and was cut mid-word.

``volumes`` prints, for the given brokers, each LogVolume's used bytes and replica count in
BEFORE.json (a ``kubectl get logvolumes -o json`` taken earlier) -> now, as the brokers report
them (DescribeLogDirs): what the executed moves did to the disks.

Bytes are shown as the LogVolume's USED/TOTAL column shows them
(``spindle.operator.quantity.format_bytes``: 202B, 1.1Ki, 973.4Mi). That module is loaded by its
path: importing the ``spindle.operator`` package registers the operator's kopf handlers (about
1,100 modules, seconds of start-up) and quantity needs none of it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Moves listed before "... and N more" (a demo's plan has a handful).
MOVES_SHOWN = 20
#: Empty replicas' moves named on their one line.
EMPTY_NAMED = 4


def _load_format_bytes() -> Callable[[int], str]:
    path = Path(__file__).resolve().parents[2] / "operator" / "quantity.py"
    spec = importlib.util.spec_from_file_location("_spindle_quantity", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fmt: Callable[[int], str] = module.format_bytes
    return fmt


format_bytes = _load_format_bytes()


def _bytes(value: Any) -> str:
    return format_bytes(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _share(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "?"
    return f"{100 * value:.1f}%"


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Columns padded to their widest cell; the last column is not padded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent
        + "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=False))
        + "  "
        + row[-1]
        for row in rows
    ]


def proposal_lines(proposal: Mapping[str, Any]) -> list[str]:
    """The proposal as lines of text (see the module docstring)."""
    moves = proposal.get("replicaMoves") or []
    count = proposal.get("moves", len(moves))
    lines = [
        f"proposal ({proposal.get('mode', '?')}, planner {proposal.get('planner', '?')}): "
        f"{count} moves, {_bytes(proposal.get('intraBrokerBytes', 0))} between directories of a "
        f"broker, {_bytes(proposal.get('interBrokerBytes', 0))} between brokers",
        f"balance: {proposal.get('balanceBefore', '?')} -> {proposal.get('balanceAfter', '?')}",
    ]
    dirs = proposal.get("directories") or []
    if dirs:
        changed = [d for d in dirs if d.get("bytesBefore") != d.get("bytesAfter")]
        same = [d for d in dirs if d.get("bytesBefore") == d.get("bytesAfter")]
        rows = [["broker", "directory", "before", "", "after", ""]]
        for d in changed + same:
            rows.append(
                [
                    str(d.get("brokerId", "?")),
                    str(d.get("path", "?"))
                    + ("" if d.get("state", "Active") == "Active" else f" ({d['state']})"),
                    f"{_bytes(d.get('bytesBefore'))} {_share(d.get('utilisationBefore'))}",
                    "->",
                    f"{_bytes(d.get('bytesAfter'))} {_share(d.get('utilisationAfter'))}",
                    "" if d in changed else "(unchanged)",
                ]
            )
        lines.append(f"directories (used bytes and share of capacity; {len(changed)} change):")
        lines += [line.rstrip() for line in _table(rows)]
    if moves:
        # Largest first; replicas with no bytes (an empty partition moved to even out the
        # directories' replica counts) are summed up on one line.
        full = sorted((m for m in moves if m.get("bytes")), key=lambda m: -int(m["bytes"]))
        empty = [
            f"{m.get('topic', '?')}-{m.get('partition', '?')}" for m in moves if not m.get("bytes")
        ]
        lines.append("moves:")
        if full:
            rows = [["partition", "broker", "from", "", "to", "bytes"]]
            for m in full[:MOVES_SHOWN]:
                src, dst = m.get("sourceBroker"), m.get("destinationBroker")
                rows.append(
                    [
                        f"{m.get('topic', '?')}-{m.get('partition', '?')}",
                        str(src) if src == dst else f"{src} -> {dst}",
                        str(m.get("sourceDir", "?")),
                        "->",
                        str(m.get("destinationDir", "?")),
                        _bytes(m.get("bytes")),
                    ]
                )
            lines += _table(rows)
        if len(full) > MOVES_SHOWN:
            lines.append(f"  ... and {len(full) - MOVES_SHOWN} more moves with bytes")
        if empty:
            names = ", ".join(empty[:EMPTY_NAMED]) + (", ..." if len(empty) > EMPTY_NAMED else "")
            lines.append(f"  and {len(empty)} empty replicas (0B): {names}")
        if count > len(moves):
            lines.append(f"  ({count - len(moves)} more moves not listed in status)")
    goals = proposal.get("goals") or []
    if goals:
        lines.append("goals:")
        rows = [
            [
                str(g.get("status", "?")),
                str(g.get("name", "?")) + (f": {g['reason']}" if g.get("reason") else ""),
            ]
            for g in goals
        ]
        lines += _table(rows)
    return lines


def _volumes_by_dir(items: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str], Mapping[str, Any]]:
    out: dict[tuple[int, str], Mapping[str, Any]] = {}
    for item in items:
        status = item.get("status") or {}
        out[(item["spec"]["brokerId"], str(status.get("path", item["metadata"]["name"])))] = item
    return out


def volume_lines(
    before: Mapping[str, Any], after: Mapping[str, Any], brokers: Sequence[int]
) -> list[str]:
    """Each LogVolume of ``brokers``: used bytes and replicas in ``before`` -> ``after``."""
    old = _volumes_by_dir(before.get("items") or [])
    new = _volumes_by_dir(after.get("items") or [])
    rows = [["logvolume", "directory", "used before", "", "used after", "replicas"]]
    for key in sorted(k for k in new if k[0] in brokers):
        was = old.get(key, {}).get("status") or {}
        now = new[key].get("status") or {}
        rows.append(
            [
                str(new[key]["metadata"]["name"]),
                key[1],
                _bytes(was.get("usedBytes")),
                "->",
                _bytes(now.get("usedBytes")),
                f"{was.get('replicaCount', '?')} -> {now.get('replicaCount', '?')}",
            ]
        )
    return _table(rows)


def main(argv: Sequence[str]) -> int:
    if argv[:1] == ["proposal"]:
        body = json.load(sys.stdin)
        proposal = (body.get("status") or {}).get("proposal") if "status" in body else body
        print("\n".join(proposal_lines(proposal or {})))
        return 0
    if argv[:1] == ["volumes"] and len(argv) >= 3:
        before = json.loads(Path(argv[1]).read_text())
        print("\n".join(volume_lines(before, json.load(sys.stdin), [int(b) for b in argv[2:]])))
        return 0
    print(__doc__.split("\n\n")[0], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
