"""The distribution maps every package folder into the ``spindle`` namespace."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = {"broker": "spindle.broker", "operator": "spindle.operator", "rebalance": "spindle.rebalance"}


def _package_folders() -> set[str]:
    names: set[str] = set()
    for folder, namespace in TOP.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            names.add(".".join([namespace, *rel.parts]))
    return names


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert _package_folders() == listed


def test_every_package_imports_under_the_spindle_namespace_and_says_what_it_is() -> None:
    for name in sorted(_package_folders()):
        module = importlib.import_module(name)
        assert (module.__doc__ or "").strip(), f"{name} has no docstring"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./dev test" in readme
    assert ci.strip().splitlines()[-1] == "exec ./dev test"
