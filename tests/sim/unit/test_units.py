"""Pure-function tests: selectors, patches, managedFields/apply, continue tokens."""

from __future__ import annotations

import pytest

from watchkeeper_sim.storage import fields as _fields
from watchkeeper_sim.storage import patch as _patch
from watchkeeper_sim.storage import strategic as _strategic
from watchkeeper_sim.storage.selectors import SelectorError, matcher, parse_labels
from watchkeeper_sim.storage.store import StoreError, decode_continue, encode_continue


def obj(labels: dict[str, str] | None = None, name: str = "x", ns: str = "d") -> dict:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1", {"a": "2"}, False),
        ("a!=1", {}, True),
        ("a!=1", {"a": "1"}, False),
        ("a in (1,2)", {"a": "2"}, True),
        ("a notin (1,2)", {"a": "3"}, True),
        ("a notin (1,2)", {"a": "1"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": "x"}, False),
        ("!a", {"b": "x"}, True),
        ("a=1,b", {"a": "1", "b": "2"}, True),
        ("a=1, b in (x)", {"a": "1", "b": "y"}, False),
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert matcher(selector, "", "configmaps")(obj(labels)) is expected


def test_label_selector_errors_use_apimachinery_wording() -> None:
    with pytest.raises(SelectorError) as e:
        parse_labels("a in (1")
    assert str(e.value) == "unable to parse requirement: found '', expected: ',' or ')'"
    with pytest.raises(SelectorError):
        parse_labels("a,,b")
    with pytest.raises(SelectorError):
        parse_labels("=x")


def test_field_selectors() -> None:
    m = matcher("", "metadata.name=x,metadata.namespace!=other", "configmaps")
    assert m(obj(name="x"))
    assert not m(obj(name="y"))
    with pytest.raises(SelectorError) as e:
        matcher("", "data.k=v1", "configmaps")
    assert str(e.value) == (
        '"data.k" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )


def test_merge_patch() -> None:
    doc = {"a": {"b": 1, "c": 2}, "l": [1]}
    assert _patch.merge_patch(doc, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3}, "l": [2]}


def test_json_patch_ops_and_failures() -> None:
    doc = {"data": {"a": "1"}, "l": [1, 2]}
    out = _patch.json_patch(doc, [
        {"op": "add", "path": "/data/b", "value": "2"},
        {"op": "replace", "path": "/data/a", "value": "x"},
        {"op": "add", "path": "/l/-", "value": 3},
        {"op": "remove", "path": "/l/0"},
        {"op": "copy", "from": "/data/b", "path": "/data/c"},
        {"op": "move", "from": "/data/c", "path": "/data/d"},
        {"op": "test", "path": "/data/d", "value": "2"},
        {"op": "add", "path": "/data/e~1f", "value": "slash"},
    ])
    assert out == {"data": {"a": "x", "b": "2", "d": "2", "e/f": "slash"}, "l": [2, 3]}
    assert doc == {"data": {"a": "1"}, "l": [1, 2]}  # input untouched
    for bad in ([{"op": "test", "path": "/data/a", "value": "no"}],
                [{"op": "remove", "path": "/data/zzz"}],
                [{"op": "replace", "path": "/nope/x", "value": 1}],
                {"op": "add"}):
        with pytest.raises(_patch.PatchError):
            _patch.json_patch(doc, bad)


def test_strategic_merge_merges_named_lists() -> None:
    doc = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}
    out = _strategic.strategic_merge(doc, {"spec": {"containers": [
        {"name": "b", "image": "2"}, {"name": "c", "image": "3"}, {"name": "a", "$patch": "delete"}
    ]}, "$setElementOrder/x": []}, {("spec", "containers"): "name"})
    assert out == {"spec": {"containers": [{"name": "b", "image": "2"},
                                           {"name": "c", "image": "3"}]}}


def test_continue_tokens_round_trip_and_match_apiserver_format() -> None:
    tok = encode_continue(242, "cm-2\x00")
    assert tok == "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjQyLCJzdGFydCI6ImNtLTJcdTAwMDAifQ"
    assert decode_continue(tok) == (242, "cm-2\x00")
    with pytest.raises(StoreError) as e:
        decode_continue("not-a-valid-token")
    assert e.value.code == 400
    assert e.value.status["message"] == (
        "invalid continue token: continue key is not valid: illegal base64 data at input byte 16")


def test_apply_ownership_model() -> None:
    now = "2026-01-01T00:00:00Z"
    a = _fields.apply(None, {"metadata": {"name": "x"}, "data": {"owned": "1", "k": "v"}},
                      manager="a", force=False, api_version="v1", now=now)
    assert a["metadata"]["managedFields"][0]["fieldsV1"] == {"f:data": {"f:k": {}, "f:owned": {}}}
    with pytest.raises(_fields.ApplyConflict) as e:
        _fields.apply(a, {"data": {"owned": "2"}}, manager="b", force=False, api_version="v1",
                      now=now)
    assert e.value.message == 'Apply failed with 1 conflict: conflict with "a": .data.owned'
    # same value: no conflict, shared ownership
    b = _fields.apply(a, {"data": {"owned": "1", "mine": "b"}}, manager="b", force=False,
                      api_version="v1", now=now)
    assert b["data"] == {"owned": "1", "k": "v", "mine": "b"}
    # force moves ownership; a re-apply without a field removes what only it owned
    c = _fields.apply(b, {"data": {"owned": "3"}}, manager="b", force=True, api_version="v1",
                      now=now)
    assert c["data"] == {"owned": "3", "k": "v"}  # "mine" was dropped by b
    d = _fields.apply(c, {"data": {}}, manager="a", force=False, api_version="v1", now=now)
    assert d["data"] == {"owned": "3"}  # a gave up k; owned now belongs to b only
    managers = {e["manager"]: e for e in d["metadata"]["managedFields"]}
    assert managers["b"]["fieldsV1"] == {"f:data": {"f:owned": {}}}


def test_update_manager_conflicts_name_the_api_version() -> None:
    now = "t"
    base = {"metadata": {"name": "x"}, "data": {"k": "v"}}
    _fields.record_update(None, base, manager="curl", api_version="v1", now=now)
    with pytest.raises(_fields.ApplyConflict) as e:
        _fields.apply(base, {"data": {"k": "w"}}, manager="ssa", force=False, api_version="v1",
                      now=now)
    assert e.value.conflicts == [('"curl" using v1', ".data.k")]
