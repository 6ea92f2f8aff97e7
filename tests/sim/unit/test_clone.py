"""storage.clone: the copy every write makes shares nothing mutable with its source."""

from __future__ import annotations

import copy
from collections import OrderedDict

from watchkeeper_sim.storage.clone import clone


def test_a_clone_shares_no_dict_or_list_and_equals_its_source() -> None:
    doc = {"metadata": {"name": "a", "labels": {"x": "1"}, "finalizers": ["f"],
                        "managedFields": [{"fieldsV1": {"f:data": {}}}]},
           "data": {"n": 1, "f": 1.5, "t": True, "z": None}}
    out = clone(doc)
    assert out == doc
    out["metadata"]["labels"]["x"] = "2"
    out["metadata"]["finalizers"].append("g")
    out["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]["k"] = {}
    assert doc["metadata"]["labels"] == {"x": "1"}  # type: ignore[index]
    assert doc["metadata"]["finalizers"] == ["f"]  # type: ignore[index]
    assert doc["metadata"]["managedFields"] == [{"fieldsV1": {"f:data": {}}}]  # type: ignore[index]


def test_what_is_not_plain_json_is_deep_copied_as_before() -> None:
    inner = [1]
    doc = {"t": (inner,), "o": OrderedDict(a=[2])}
    out = clone(doc)
    assert out == copy.deepcopy(doc)
    assert out["t"][0] is not inner and out["o"]["a"] is not doc["o"]["a"]  # type: ignore[index]
    assert type(out["o"]) is OrderedDict
