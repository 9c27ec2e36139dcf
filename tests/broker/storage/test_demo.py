"""The main job (`./dev run`): the storage demo prints describe_dirs() for three dirs as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_demo_prints_three_log_dirs_with_partitions_as_json(tmp_path: Path) -> None:
    dirs = [str(tmp_path / f"d{i}") for i in range(3)]
    argv = [sys.executable, "-m", "spindle.broker.storage.demo"]
    for d in dirs:
        argv += ["--dir", d]
    out = subprocess.run(argv, check=True, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    data = json.loads(out.stdout)
    assert [d["logDir"] for d in data["logDirs"]] == dirs
    assert all(d["error"] == "NONE" and len(d["directoryId"]) == 22 for d in data["logDirs"])
    parts = sorted(p["partition"] for d in data["logDirs"] for p in d["partitions"])
    assert parts == ["demo-0", "demo-1"]
    assert all(p["size"] > 0 for d in data["logDirs"] for p in d["partitions"])
    # Shut down cleanly: every directory carries the clean-shutdown marker.
    assert all((Path(d) / ".kafka_cleanshutdown").exists() for d in dirs)
