"""Rewrite imports of the old ``watchkeeper.testing`` to ``watchkeeper_sim`` (issue 12).

The simulator moved from src/watchkeeper/testing/ into its own distribution, sim/; a branch
written before the move still says ``from watchkeeper.testing import ApiServer`` or names a
private module (``watchkeeper.testing._store``). Run this on such files after merging:

    python scripts/rewrite_sim_imports.py tests/cache/test_shared.py benchmarks/*.py

(then ``ruff check --fix`` sorts the rewritten import blocks). It is the rewrite that moved
the tree, kept so later merges can use it; it changes nothing it does not recognise.
"""
import ast
import re
import sys

MAP = {
 "apiserver": "server", "faults": "faults", "manifests": "manifests",
 "_status": "status",
 "_store": "storage.store", "_registry": "storage.registry", "_gc": "storage.gc",
 "_namespaces": "storage.namespaces", "_resources": "storage.resources",
 "_bootstrap": "storage.bootstrap", "_validation": "storage.validation",
 "_metavalid": "storage.metavalid", "_fields": "storage.fields", "_patch": "storage.patch",
 "_selectors": "storage.selectors",
 "_rbac": "auth.rbac", "_escalation": "auth.escalation", "_impersonation": "auth.impersonation",
 "_reviews": "auth.reviews", "_tokens": "auth.tokens", "_tls": "auth.tls",
 "_handlers": "api.handlers", "_watch": "api.watch", "_represent": "api.represent",
 "_nonresource": "api.nonresource", "_deprecation": "api.deprecation", "_health": "api.health",
 "_http": "wire.http", "_wire": "wire.body", "_reqlog": "wire.reqlog",
 "_discovery": "documents.discovery", "_openapi": "documents.openapi",
 "_schemas": "documents.schemas", "_table": "documents.table",
 "_printcolumns": "documents.printcolumns", "_protobuf": "documents.protobuf",
 "_protodecode": "documents.protodecode", "_keyorder": "documents.keyorder",
 "_events": "documents.events",
}


PUBLIC_MODS = set(MAP)  # submodule names importable via "from watchkeeper.testing import X"


def newmod(old):  # "_store" -> "watchkeeper_sim.storage.store"
    return "watchkeeper_sim." + MAP[old]

def rewrite_from_pkg(m):
    """from watchkeeper.testing import a, b as c  (names may be submodules or public names)."""
    indent, body = m.group(1), m.group(2)
    body = body.strip().strip("()")
    names = [n.strip() for n in body.replace("\n", " ").split(",") if n.strip()]
    public, lines = [], []
    for n in names:
        parts = n.split(" as ")
        name, alias = parts[0].strip(), (parts[1].strip() if len(parts) > 1 else None)
        if name in PUBLIC_MODS:
            full = newmod(name)
            parent, leaf = full.rsplit(".", 1)
            alias = alias or (name if name != leaf else None)
            lines.append(f"{indent}from {parent} import {leaf}" + (f" as {alias}" if alias else ""))
        else:
            public.append(n)
    if public:
        lines.insert(0, f"{indent}from watchkeeper_sim import {', '.join(public)}")
    return "\n".join(lines)

PKG_IMPORT = re.compile(r"^([ \t]*)from watchkeeper\.testing import (\([^)]*\)|[^\n]*)", re.M)
def dotted(m):
    old = m.group(1)
    return newmod(old) if old in MAP else m.group(0)
DOTTED = re.compile(r"watchkeeper\.testing\.([A-Za-z_]+)")

def rewrite_text(t):
    t = PKG_IMPORT.sub(rewrite_from_pkg, t)
    t = t.replace("from watchkeeper import testing", "import watchkeeper_sim as testing")
    t = DOTTED.sub(dotted, t)
    t = re.sub(r"watchkeeper\.testing\b", "watchkeeper_sim", t)
    t = t.replace("watchkeeper._demo", "watchkeeper_sim.demo")
    t = t.replace("tests.testing", "tests.sim").replace("tests/testing", "tests/sim")
    t = t.replace("src/watchkeeper/testing/", "sim/watchkeeper_sim/")
    return t

MODEL = {"JSON", "ResourceType", "PrinterColumn", "Key"}


def fmt(xs):
    return ", ".join(n + (f" as {a}" if a else "") for n, a in xs)


def split_store_imports(path, t):
    tree = ast.parse(t)
    lines = t.split("\n")
    edits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "watchkeeper_sim.storage.store":
            names = [(a.name, a.asname) for a in node.names]
            mine = [x for x in names if x[0] in MODEL]
            if not mine:
                continue
            rest = [x for x in names if x[0] not in MODEL]
            ind = " " * node.col_offset
            new = [f"{ind}from watchkeeper_sim.model import {fmt(mine)}"]
            if rest:
                new.append(f"{ind}from watchkeeper_sim.storage.store import {fmt(rest)}")
            edits.append((node.lineno - 1, node.end_lineno, new))
    for a, b, new in sorted(edits, reverse=True):
        lines[a:b] = new
    return "\n".join(lines)


def main(paths: list[str]) -> int:
    for path in paths:
        with open(path) as f:
            text = f.read()
        new = rewrite_text(text)
        if path.endswith(".py"):
            new = split_store_imports(path, new)
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            print("rewrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
