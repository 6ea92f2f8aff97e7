"""client-go JSONPath as the simulator evaluates additionalPrinterColumns (issue 22, case 4):
the expected values are kube-apiserver 1.28.7's (tests/fixtures/apiserver-1.28-issue22 061)
or client-go's own jsonpath_test.go."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from watchkeeper_sim.documents import jsonpath
from watchkeeper_sim.documents.printcolumns import cell
from watchkeeper_sim.model import PrinterColumn

DOC: dict[str, Any] = {
    "items": [{"name": "a", "size": 1}, {"name": "b", "size": 3, "flag": True},
              {"name": "c", "size": 2}],
    "conditions": [{"type": "Ready", "status": "True"}, {"type": "Synced", "status": "False"}],
    "labels": {"app.kubernetes.io/name": "demo", "plain": "yes"},
    "mixed": [{"name": "s", "v": "1"}, {"name": "i", "v": 1}],
    "nested": {"x": {"name": "deep"}},
}


@pytest.mark.parametrize(("path", "expected"), [
    ('.conditions[?(@.type=="Ready")].status', ["True"]),
    ('.conditions[?(@.type!="Ready")].status', ["False"]),
    (".items[?(@.size>2)].name", ["b"]),
    (".items[?(@.size>=2)].name", ["b", "c"]),
    (".items[?(@.size<2)].name", ["a"]),
    (".items[?(@.size<=2)].name", ["a", "c"]),
    (".items[?(@.flag)].name", ["b"]),
    (".items[?(@.flag==true)].name", ["b"]),
    (".items[*].name", ["a", "b", "c"]),
    (".items[2,0].name", ["c", "a"]),
    (".items[1:].name", ["b", "c"]),
    (".items[-1:].name", ["c"]),
    (".items[0:3:2].name", ["a", "c"]),
    (".items[1].size", [3]),
    (".items..name", ["a", "b", "c"]),
    (".nested..name", ["deep"]),
    (".labels.app\\.kubernetes\\.io/name", ["demo"]),
    (".labels['plain']", ["yes"]),
    (".labels['app.kubernetes.io/name']", []),  # read as fields app, kubernetes, io/name
    (".missing.field", []),
])
def test_paths(path: str, expected: list[Any]) -> None:
    (results,) = jsonpath.find_results(jsonpath.parse("{" + path + "}"), DOC)
    assert results == expected


@pytest.mark.parametrize("path", [
    ".items[?(@.size>1.5)].name",  # an int64 against a float: incompatible types
    ".mixed[?(@.v==1)].name",  # a string against an int, on the first item
    ".items[5].name",  # out of bounds
    ".labels[0]",  # a map indexed
])
def test_evaluation_errors_leave_the_cell_empty(path: str) -> None:
    with pytest.raises(jsonpath.JSONPathError):
        jsonpath.find_results(jsonpath.parse("{" + path + "}"), DOC)
    path = path.replace(".", ".spec.", 1)
    column = PrinterColumn(name="X", type="string", json_path=path)
    assert cell(column, {"spec": DOC}, datetime.now(UTC), None) is None
    ok = PrinterColumn(name="Y", type="string", json_path=".spec.items[0].name")
    assert cell(ok, {"spec": DOC}, datetime.now(UTC), None) == "a"


@pytest.mark.parametrize("path", [".items[?(@.x", ".items[", ".a{", ".items[a:b]"])
def test_unparsable_paths(path: str) -> None:
    with pytest.raises(jsonpath.JSONPathError):
        jsonpath.parse("{" + path + "}")


@pytest.mark.parametrize(("value", "printed"), [
    ({"z": "1", "a": "<b>"}, '{"a":"\\u003cb\\u003e","z":"1"}'),
    (["x", "y"], '["x","y"]'),
    (None, "<no value>"),
    (True, "true"),
    (0.5, "0.5"),
    (1000000.5, "1.0000005e+06"),
    (1e-05, "1e-05"),
    (123456.5, "123456.5"),
    (1e21, "1e+21"),
    (3, "3"),
    ("a<b>&c", "a<b>&c"),
])
def test_printed_like_kube_apiserver(value: Any, printed: str) -> None:
    assert jsonpath.print_value(value) == printed
