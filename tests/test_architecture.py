"""The shape of the code (docs/architecture.md), checked in the suite as well as by
``lint-imports``: every module of both distributions is in a layer, and no sibling modules
import each other both ways (counting imports inside functions and under TYPE_CHECKING)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOTS = ("watchkeeper", "watchkeeper_sim")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*ROOTS)


def _contracts() -> list[dict[str, object]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts: list[dict[str, object]] = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    return contracts


def test_every_module_is_in_a_layer(graph: grimp.ImportGraph) -> None:
    named: set[str] = set()
    for c in _contracts():
        if c["type"] != "layers":
            continue
        containers = c.get("containers") or [""]
        assert isinstance(containers, list) and isinstance(c["layers"], list)
        for layer in c["layers"]:
            for module in str(layer).replace(":", "|").split("|"):
                named.update(f"{k}.{module.strip()}" if k else module.strip() for k in containers)
    children = {m for root in ROOTS for m in graph.find_children(root)}
    assert children - named == set()


def test_the_acyclic_contract_covers_both_distributions() -> None:
    acyclic = [c for c in _contracts() if c["type"] == "acyclic_siblings"]
    assert len(acyclic) == 1 and set(acyclic[0]["ancestors"]) == set(ROOTS)  # type: ignore[call-overload]


def _cycles(graph: grimp.ImportGraph, package: str) -> list[tuple[str, str]]:
    """Pairs of children of ``package`` (each with its descendants) that reach each other."""
    kids = sorted(graph.find_children(package))
    reach: dict[str, set[str]] = {}
    for k in kids:
        modules = {k, *graph.find_descendants(k)}
        direct = {i for m in modules for i in graph.find_modules_directly_imported_by(m)}
        reach[k] = {o for o in kids if o != k and any(i == o or i.startswith(o + ".")
                                                        for i in direct)}
    closure = {k: set(v) for k, v in reach.items()}
    changed = True
    while changed:
        changed = False
        for k in kids:
            more = set().union(*(closure[o] for o in closure[k])) - closure[k]
            if more:
                closure[k] |= more
                changed = True
    return [(a, b) for a in kids for b in closure[a] if a < b and a in closure[b]]


def test_no_sibling_modules_import_each_other(graph: grimp.ImportGraph) -> None:
    packages = [m for m in sorted(graph.modules) if graph.find_children(m)]
    assert [p for p in ROOTS if p in packages] == list(ROOTS)
    assert {p: c for p in packages if (c := _cycles(graph, p))} == {}


RUNTIME_TEST_DIRS = {"client", "watcher", "cache", "controller", "leader", "ops", "cli"}
SIM_TEST_DIRS = {"unit", "contract", "kubectl"}


def _test_dirs(path: Path) -> set[str]:
    return {p.name for p in path.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}


def test_tests_mirror_the_packages() -> None:
    """A newcomer finds a module's tests under the same name: tests/runtime/<package> for the
    runtime, tests/sim/{unit,contract,kubectl} for the simulator. A new test folder that maps
    to no package (or a package left without one) fails here."""
    runtime = _test_dirs(ROOT / "tests" / "runtime")
    assert runtime >= RUNTIME_TEST_DIRS, f"missing: {RUNTIME_TEST_DIRS - runtime}"
    src = ROOT / "src" / "watchkeeper"
    for name in runtime:
        assert (src / name).is_dir() or (src / f"{name}.py").is_file(), (
            f"tests/runtime/{name} names no package or module of watchkeeper")
    assert _test_dirs(ROOT / "tests" / "sim") == SIM_TEST_DIRS
    loose = [p.name for p in (ROOT / "tests").glob("test_*.py")]
    assert sorted(loose) == ["test_architecture.py", "test_docs.py"], (
        "runtime tests live under tests/runtime/<package>")


def test_the_runtime_never_names_the_simulator() -> None:
    """The runtime reaches the simulator's commands through the `watchkeeper.commands`
    entry points only: not even a module name handed to importlib, which import-linter
    cannot see (docstrings may mention it)."""
    named = []
    for path in sorted((ROOT / "src" / "watchkeeper").rglob("*.py")):
        tree = ast.parse(path.read_text())
        prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        named += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and "watchkeeper_sim" in n.value and id(n) not in prose]
    assert named == []
