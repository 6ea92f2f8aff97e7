"""docs/errors.md says it lists every error class: hold it to that for every exception class
`watchkeeper` exports, so a new one cannot ship undocumented."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import watchkeeper as wk

ERRORS_MD = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


def exported_exceptions() -> set[str]:
    """Every exception class reachable as ``wk.<name>``."""
    return {
        name for name in dir(wk)
        if isinstance(obj := getattr(wk, name), type) and issubclass(obj, BaseException)
    }


def documented_names(markdown: str) -> set[str]:
    """Class names in backticks (``Name`` or ``wk.Name``) in a heading or in the first
    column of a table row: a mention in passing does not count as documenting it."""
    names: set[str] = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            where = line
        elif line.startswith("|") and not re.fullmatch(r"[|\s:-]+", line):
            where = line.split("|")[1]
        else:
            continue
        names.update(re.findall(r"`(?:wk\.)?([A-Za-z_][A-Za-z0-9_]*)`", where))
    return names


def test_every_exported_exception_class_is_documented_in_errors_md() -> None:
    exported = exported_exceptions()
    # the walk itself works: it finds classes from every layer that exports them
    assert {"ApiError", "BadRequest", "ConfigError", "WatcherUnhealthy",
            "ControllerUnhealthy"} <= exported
    missing = sorted(exported - documented_names(ERRORS_MD.read_text()))
    assert not missing, (
        f"exported from watchkeeper but not documented in docs/errors.md (a heading or a "
        f"table row naming it in backticks, saying what raises it and what the user does): "
        f"{', '.join(missing)}"
    )


def test_the_documentation_check_rejects_a_mention_in_passing() -> None:
    """Only headings and first table cells count, so prose that names a class in passing
    (as errors.md's introduction names `wk.ApiError`) does not hide a missing entry."""
    text = "Every failure is a `wk.ApiError`.\n\n| class | when |\n|---|---|\n| `Gone` | 410 |\n"
    assert documented_names(text) == {"Gone"}
    assert documented_names("## `wk.LeadershipLost`\n") == {"LeadershipLost"}


# -- docs, README, examples and benchmarks use only the public API ---------------------------

REPO = ERRORS_MD.parents[1]
PUBLIC = {"watchkeeper", "watchkeeper_sim"}  # each one's public API is its __init__'s __all__
# Benchmarks that measure an internal on purpose (the reason is theirs to keep): file -> names.
MEASURED_INTERNALS = {
    "benchmarks/decode_floor.py": {"watchkeeper.client.api._Head"},
    "benchmarks/piece_floor.py": {"watchkeeper.client.objects._Head"},
    "benchmarks/watch_breakdown.py": {"watchkeeper.client.api._Head",
                                      "watchkeeper.client.api._decode_any"},
    "benchmarks/kindness_fleet.py": {"watchkeeper.client.circuit.CircuitState",
                                      "watchkeeper.client.circuit.PROBE_MAX"},
    "benchmarks/chunk_framing.py": {"watchkeeper.client._http1"},
    # times the steps of a paced read in place (issue 25)
    "benchmarks/paced_breakdown.py": {"watchkeeper.client._http1.ResponseProtocol",
                                      "watchkeeper.client._pieces.PieceDecoder"},
    # measures the simulator's write path with its old document copy
    "benchmarks/sim_writes.py": {"watchkeeper_sim.storage.fields",
                                 "watchkeeper_sim.storage.namespaces",
                                 "watchkeeper_sim.storage.patch",
                                 "watchkeeper_sim.storage.registry",
                                 "watchkeeper_sim.storage.store"},
    # the simulator process of the benchmarks patches the simulator's serving path
    "benchmarks/_sim_runner.py": {
        "watchkeeper_sim.api.handlers.Handlers", "watchkeeper_sim.api.watch",
        "watchkeeper_sim.storage.registry.present", "watchkeeper_sim.wire.http.BASE_HEADERS",
        "watchkeeper_sim.wire.http.encode",
    },
}


def _exported(package: str) -> set[str]:
    module = importlib.import_module(package)
    return set(module.__all__)


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def imported_names(code: str) -> set[str]:
    """``package.module.name`` for every import of a watchkeeper or watchkeeper_sim name,
    and ``wk.X`` / ``watchkeeper.X`` attribute uses (a fragment that does not parse is read
    line by line)."""
    names: set[str] = set()
    try:  # a doc block may await at the top level
        tree = compile(code, "<code>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        if "\n" not in code.strip():  # one line that is not Python alone: its attributes
            return {f"watchkeeper.{a}" for a in re.findall(r"\bwk\.(\w+)", code)}
        for line in code.splitlines():
            names |= imported_names(line.strip())
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in PUBLIC:
                names.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] in PUBLIC)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id in ("wk", "watchkeeper")):
            names.add(f"watchkeeper.{node.attr}")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
              and isinstance(node.value.value, ast.Name) and node.value.value.id == "wk"
              and node.value.attr == "meta"):
            names.add(f"watchkeeper.meta.{node.attr}")
    return names


def non_public(names: set[str]) -> set[str]:
    """The names that are not ``package`` itself or ``package.<something in __all__>``;
    ``watchkeeper.meta``'s public readers count too (it is exported as a module)."""
    bad = set()
    for name in names:
        parts = name.split(".")
        if len(parts) == 1 and parts[0] in PUBLIC:
            continue
        if len(parts) == 2 and parts[0] in PUBLIC and parts[1] in _exported(parts[0]):
            continue
        if parts[:2] == ["watchkeeper", "meta"] and len(parts) == 3 \
                and not parts[2].startswith("_") and hasattr(wk.meta, parts[2]):
            continue
        bad.add(name)
    return bad


def _sources() -> dict[str, str]:
    """Every piece of user-facing code: docs/*.md and README.md code blocks, examples,
    benchmarks."""
    out = {}
    for md in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for i, block in enumerate(_python_blocks(md.read_text())):
            out[f"{md.relative_to(REPO)} block {i + 1}"] = block
    for folder in ("examples", "benchmarks"):
        for py in sorted((REPO / folder).rglob("*.py")):
            out[str(py.relative_to(REPO))] = py.read_text()
    return out


def test_docs_examples_and_benchmarks_use_only_exported_names() -> None:
    sources = _sources()
    assert "examples/widget_operator.py" in sources and "docs/guide.md block 1" in sources
    problems = {}
    for where, code in sources.items():
        bad = non_public(imported_names(code)) - MEASURED_INTERNALS.get(where, set())
        if bad:
            problems[where] = sorted(bad)
    assert problems == {}, (
        "use what `watchkeeper` (or `watchkeeper_sim`) exports, e.g. "
        "wk.ClientConfig.from_kubeconfig(path) instead of watchkeeper.client.config.load_config"
    )


def test_the_public_name_check_can_fail() -> None:
    code = (
        "import watchkeeper as wk\n"
        "from watchkeeper import Store, _version\n"
        "from watchkeeper.client.config import load_config\n"
        "from watchkeeper_sim import ApiServer\n"
        "from watchkeeper_sim.storage.registry import present\n"
        "import watchkeeper.client\n"
        "wk.watcher(api); wk.meta.name(obj); wk._runner; wk.Nope; wk.meta._meta(obj)\n"
    )
    assert non_public(imported_names(code)) == {
        "watchkeeper._version", "watchkeeper.client.config.load_config",
        "watchkeeper_sim.storage.registry.present", "watchkeeper.client",
        "watchkeeper._runner", "watchkeeper.Nope", "watchkeeper.meta._meta",
    }
    # a markdown fragment that is not valid Python alone is still read
    fragment = "if ok:\n  wk.watcher(api)\n    wk._hidden\nfrom watchkeeper._x import y\n"
    assert non_public(imported_names(fragment)) == {"watchkeeper._x.y", "watchkeeper._hidden"}


def test_docs_examples_and_benchmarks_use_the_one_constructor() -> None:
    """``wk.watcher(...)`` and ``wk.Store.new()`` in all code shown to users; the class
    calls are deprecated (the guide's prose says so, which is why prose is not scanned)."""
    texts = _sources()
    old = re.compile(r"\b(?:Store|Watcher)\(")
    assert old.search("s = wk.Store()") and not old.search("wk.Store.new(); wk.watcher(api)")
    assert {where for where, text in texts.items() if old.search(text)} == set()
