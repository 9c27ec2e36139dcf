"""The main job's Rebalance tables (scripts/lib/rebalance_tables.py) show the proposal and the
disks before -> after in the LogVolume column's units, changed directories first."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from spindle.operator.quantity import format_bytes

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "lib" / "rebalance_tables.py"
MIB = 2**20


def _tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rebalance_tables", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dir(broker: int, n: int, before: int, after: int) -> dict[str, object]:
    total = 1000 * MIB
    return {
        "brokerId": broker,
        "path": f"/var/lib/spindle/data-{n}",
        "state": "Active",
        "bytesBefore": before,
        "bytesAfter": after,
        "utilisationBefore": before / total,
        "utilisationAfter": after / total,
    }


PROPOSAL = {
    "mode": "intra-broker",
    "planner": "greedy",
    "moves": 8,
    "intraBrokerBytes": 12 * MIB,
    "interBrokerBytes": 0,
    "balanceBefore": "2 directories out of band",
    "balanceAfter": "0 directories out of band",
    "directories": [
        _dir(0, 0, 17 * MIB, 17 * MIB),
        _dir(1, 0, 17 * MIB, 23 * MIB),
        _dir(1, 1, 53 * MIB, 41 * MIB),
        _dir(1, 2, 17 * MIB, 23 * MIB),
    ],
    "replicaMoves": [
        {
            "topic": "skew",
            "partition": p,
            "sourceBroker": 1,
            "destinationBroker": 1,
            "sourceDir": "/var/lib/spindle/data-1",
            "destinationDir": f"/var/lib/spindle/data-{d}",
            "bytes": 6 * MIB,
        }
        for p, d in ((0, 0), (3, 2))
    ]
    + [
        {
            "topic": "__consumer_offsets",
            "partition": p,
            "sourceBroker": 1,
            "destinationBroker": 1,
            "sourceDir": "/var/lib/spindle/data-1",
            "destinationDir": "/var/lib/spindle/data-0",
            "bytes": 0,
        }
        for p in range(6)
    ],
    "goals": [
        {"name": "diskUtilisationOverBrokerMean", "status": "met"},
        {"name": "replicaCountOverBrokers", "status": "notInScope"},
    ],
}


def test_proposal_table_lists_changed_directories_first_then_moves_by_size_and_goals() -> None:
    lines = _tables().proposal_lines(PROPOSAL)
    text = "\n".join(lines)
    assert lines[0] == (
        "proposal (intra-broker, planner greedy): 8 moves, 12Mi between directories of a "
        "broker, 0B between brokers"
    )
    assert "2 directories out of band -> 0 directories out of band" in lines[1]
    rows = [line.split() for line in lines if line.startswith("  ")]
    assert rows[0] == ["broker", "directory", "before", "after"]
    # Changed directories first, in the proposal's order; the unchanged ones after, marked.
    assert [r[:2] for r in rows[1:5]] == [
        ["1", "/var/lib/spindle/data-0"],
        ["1", "/var/lib/spindle/data-1"],
        ["1", "/var/lib/spindle/data-2"],
        ["0", "/var/lib/spindle/data-0"],
    ]
    assert rows[2][2:7] == ["53Mi", "5.3%", "->", "41Mi", "4.1%"]
    assert rows[4][-1] == "(unchanged)"
    assert [
        "skew-0",
        "1",
        "/var/lib/spindle/data-1",
        "->",
        "/var/lib/spindle/data-0",
        "6Mi",
    ] in rows
    # Empty replicas' moves (replica counts evened out for free) are one line, not six rows.
    assert (
        "  and 6 empty replicas (0B): __consumer_offsets-0, __consumer_offsets-1, "
        "__consumer_offsets-2, __consumer_offsets-3, ..."
    ) in lines
    assert "met         diskUtilisationOverBrokerMean" in text
    assert "notInScope  replicaCountOverBrokers" in text


def test_tables_use_the_logvolume_columns_units() -> None:
    module = _tables()
    for count in (0, 202, 1130, 973 * MIB, 3 * 2**40):
        assert module.format_bytes(count) == format_bytes(count)


def test_volumes_table_shows_each_volume_of_the_asked_brokers_before_and_after() -> None:
    def volumes(used: dict[tuple[int, int], int]) -> dict[str, object]:
        return {
            "items": [
                {
                    "metadata": {"name": f"demo-{b}-data-{n}"},
                    "spec": {"brokerId": b},
                    "status": {
                        "path": f"/var/lib/spindle/data-{n}",
                        "usedBytes": size,
                        "replicaCount": size // MIB,
                    },
                }
                for (b, n), size in used.items()
            ]
        }

    before = volumes({(0, 0): 681, (1, 0): 681, (1, 1): 36 * MIB})
    after = volumes({(0, 0): 681, (1, 0): 18 * MIB, (1, 1): 18 * MIB})
    lines = _tables().volume_lines(before, after, [1])
    assert [line.split() for line in lines[1:]] == [
        ["demo-1-data-0", "/var/lib/spindle/data-0", "681B", "->", "18Mi", "0", "->", "18"],
        ["demo-1-data-1", "/var/lib/spindle/data-1", "36Mi", "->", "18Mi", "36", "->", "18"],
    ]


def test_proposal_command_reads_a_rebalance_from_stdin(tmp_path: Path) -> None:
    body = json.dumps({"kind": "Rebalance", "status": {"proposal": PROPOSAL}})
    done = subprocess.run(
        [sys.executable, "-P", str(SCRIPT), "proposal"],
        input=body,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert done.stdout.startswith("proposal (intra-broker, planner greedy): 8 moves")
