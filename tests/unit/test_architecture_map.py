"""docs/ARCHITECTURE.md is the newcomer's map: every file or folder it names exists, so a move
that leaves the map behind fails here instead of misleading the next reader."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "ARCHITECTURE.md"
TOPS = ("broker/", "operator/", "rebalance/", "tests/", "crds/", "charts/", "bench/", "e2e/")
PARTS = {  # a path named inside its part's section, relative to that part
    "broker": ROOT / "broker",
    "operator": ROOT / "operator",
    "rebalance": ROOT / "rebalance",
}


def _named_paths(text: str) -> list[str]:
    """Backticked tokens that are paths: a folder or a .py file, placeholders left out."""
    out = []
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.split("(")[0].rstrip(".,")
        if "<" in token or not (token.endswith("/") or token.endswith(".py")):
            continue
        out.append(token)
    return out


def _exists(token: str) -> bool:
    if token.startswith(TOPS):
        return (ROOT / token).exists()
    return any((base / token).exists() for base in PARTS.values()) or any(
        (base / "server" / token).exists() for base in (ROOT / "broker",)
    )


def test_every_file_and_folder_the_architecture_map_names_exists() -> None:
    named = _named_paths(MAP.read_text())
    assert len(named) > 20  # the map names files; an empty parse would prove nothing
    missing = [token for token in named if not _exists(token)]
    assert missing == []
