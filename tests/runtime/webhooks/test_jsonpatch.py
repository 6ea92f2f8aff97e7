"""The RFC 6902 patch a mutating webhook answers with: applied to the object received, it
gives the handler's result. The patch is applied here by a small RFC 6902 applier written
from the RFC (independent of ``diff``), and over HTTP by the simulator in test_server."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from watchkeeper.webhooks.jsonpatch import diff, pointer


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """add / remove / replace on maps and a whole value (RFC 6902 sections 4.1-4.3)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = [_unescape(t) for t in op["path"].split("/")[1:]]
        if not tokens:
            assert op["op"] == "replace"
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for t in tokens[:-1]:
            parent = parent[t]
        last = tokens[-1]
        if op["op"] == "add":
            parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del parent[last]
        elif op["op"] == "replace":
            assert last in parent  # replace needs the target to exist
            parent[last] = copy.deepcopy(op["value"])
        else:
            raise AssertionError(op)
    return doc


def test_equal_documents_give_an_empty_patch() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}}, "data": [1, 2]}
    assert diff(obj, copy.deepcopy(obj)) == []


def test_keys_with_slash_and_tilde_are_escaped() -> None:
    old = {"metadata": {"annotations": {"example.com/a~b": "1"}}}
    new = {"metadata": {"annotations": {"example.com/a~b": "2", "x/y": "3"}}}
    assert diff(old, new) == [
        {"op": "replace", "path": "/metadata/annotations/example.com~1a~0b", "value": "2"},
        {"op": "add", "path": "/metadata/annotations/x~1y", "value": "3"},
    ]
    assert pointer(["a/b", "~"]) == "/a~1b/~0"


def test_a_removed_key_a_changed_list_and_a_type_change() -> None:
    old = {"spec": {"ports": [80, 443], "debug": True, "replicas": 1}}
    new = {"spec": {"ports": [443], "replicas": 1.0}}
    ops = diff(old, new)
    assert {"op": "remove", "path": "/spec/debug"} in ops
    assert {"op": "replace", "path": "/spec/ports", "value": [443]} in ops
    assert {"op": "replace", "path": "/spec/replicas", "value": 1.0} in ops  # int -> float
    assert apply(old, ops) == new


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "c/d", "e~f", ""]), inner, max_size=3),
    max_leaves=12,
)


@given(json_values, json_values)
def test_the_patch_takes_the_old_document_to_the_new(old: Any, new: Any) -> None:
    assert apply(old, diff(old, new)) == new
