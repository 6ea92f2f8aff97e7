"""CRD ``x-kubernetes-validations`` (CEL) rules (storage/celrules.py): each answer below is
kube-apiserver 1.28.7's for the same CRD and requests (recorded 2026-12-05; the order of
causes from sibling fields is Go's map order there, so those are compared as sets)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import watchkeeper as wk
from watchkeeper_sim import ApiServer

SKIPPED = ('Invalid value: "null": some validation rules were not checked because the object '
           "was invalid; correct the existing errors to complete validation")


def _crd(name: str, kind: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": name, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": schema}}]},
    }


def _rule(rule: str, **extra: str) -> dict[str, str]:
    return {"rule": rule, **extra}


CRD = _crd("probes", "Probe", {
    "type": "object",
    "x-kubernetes-validations": [_rule("self.metadata.name.startsWith('p')",
                                       message="root rule")],
    "properties": {
        "spec": {"type": "object", "properties": {
            "a": {"type": "integer"},
            "tier": {"type": "string", "enum": ["x", "y"]},
            "short": {"type": "string", "maxLength": 3},
            "x-y": {"type": "integer"},
            "in": {"type": "integer"},
            "ratio": {"type": "number"},
            "m": {"type": "object", "maxProperties": 3, "additionalProperties": {
                "type": "string", "maxLength": 5,
                "x-kubernetes-validations": [_rule("self != 'bad'")]}},
            "l": {"type": "array", "maxItems": 3, "items": {
                "type": "string", "maxLength": 5, "x-kubernetes-validations": [
                    _rule("self != 'bad'", reason="FieldValueDuplicate", message="dup")]}},
        }, "x-kubernetes-validations": [
            _rule("self.a <= 2", reason="FieldValueRequired", message="req", fieldPath=".a"),
            # property names that are not CEL identifiers are escaped
            _rule("self.x__dash__y == 3 && self.__in__ == 4", message="escaped"),
            # a number sent as 2 is the double 2.0
            _rule("self.ratio > 1.0", message="ratio"),
            # a messageExpression that fails, or gives a line break, falls back
            _rule("self.a != 2", messageExpression="self.l[5]", message="fallback"),
            _rule("self.a != 2", messageExpression="self.l[0]"),
        ]},
        "status": {"type": "object", "properties": {"s": {
            "type": "integer", "x-kubernetes-validations": [
                _rule("self < 10", message="small"),
                _rule("self >= oldSelf", message="grows")]}}},
    },
})
VALID = {"a": 1, "x-y": 3, "in": 4, "ratio": 1.5}


@pytest.fixture
async def probes(apiserver: ApiServer) -> AsyncIterator[wk.Api]:
    apiserver.create_object(CRD)
    async with apiserver.client() as client:
        yield client.api("probes.example.com", namespace="default")


def probe(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Probe", "metadata": {"name": name},
            "spec": spec}


def causes(err: pytest.ExceptionInfo[wk.Invalid]) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in err.value.details["causes"]]


async def test_rules_run_at_their_nodes_with_their_reasons(probes: wk.Api) -> None:
    with pytest.raises(wk.Invalid) as err:
        await probes.create(probe("q1", {"a": 2, "x-y": 3, "in": 4, "ratio": 2,
                                         "m": {"k": "bad"}, "l": ["x\ny", "bad"]}))
    got = causes(err)
    # the root's rule names no field; then the spec's, in order; then its fields'
    assert got[:3] == [
        ("<nil>", "FieldValueInvalid", 'Invalid value: "object": root rule'),
        ("spec", "FieldValueInvalid", 'Invalid value: "object": fallback'),
        ("spec", "FieldValueInvalid", 'Invalid value: "object": failed rule: self.a != 2')]
    assert set(got[3:]) == {
        ("spec.l[1]", "FieldValueDuplicate", 'Duplicate value: "string"'),
        ("spec.m[k]", "FieldValueInvalid", "Invalid value: \"string\": failed rule: self != 'bad'")}


async def test_an_absent_field_is_an_evaluation_error_and_an_enum_does_not_block(
    probes: wk.Api,
) -> None:
    with pytest.raises(wk.Invalid) as err:
        await probes.create(probe("p2", {"ratio": 2, "tier": "z", "x-y": 3}))
    spec = 'Invalid value: "object": no such key: '
    assert causes(err) == [
        ("spec.tier", "FieldValueNotSupported",
         'Unsupported value: "z": supported values: "x", "y"'),
        ("spec", "FieldValueInvalid", spec + "a evaluating rule: req"),
        ("spec", "FieldValueInvalid", spec + "__in__ evaluating rule: escaped"),
        ("spec", "FieldValueInvalid", spec + "a evaluating rule: fallback"),
        ("spec", "FieldValueInvalid", spec + "a evaluating rule: self.a != 2")]
    # of two errors on both sides of && cel-go reports the left one, cel-rust the right one
    # (a documented difference, docs/simulator.md)


async def test_a_blocking_schema_error_skips_the_rules(probes: wk.Api) -> None:
    with pytest.raises(wk.Invalid) as err:
        await probes.create(probe("q3", {**VALID, "short": "toolong"}))
    assert causes(err) == [
        ("spec.short", "FieldValueTooLong", "Too long: may not be longer than 3"),
        ("<nil>", "FieldValueInvalid", SKIPPED)]


async def test_a_false_rules_field_path_moves_the_nodes_later_causes(probes: wk.Api) -> None:
    await probes.create(probe("p1", VALID))
    with pytest.raises(wk.Invalid) as err:
        await probes.patch("p1", {"spec": {"ratio": 0.5, "a": 5}})
    # kube-apiserver 1.28 reports the ratio rule (no fieldPath) at spec.a too
    assert causes(err) == [
        ("spec.a", "FieldValueRequired", "Required value: req"),
        ("spec.a", "FieldValueInvalid", 'Invalid value: "object": ratio')]


async def test_status_rules_and_transition_rules(probes: wk.Api) -> None:
    await probes.create(probe("p1", VALID))
    # no old value: the transition rule is skipped
    written = await probes.patch("p1", {"status": {"s": 4}}, subresource="status")
    assert written["status"] == {"s": 4}
    for value, message in ((40, "small"), (3, "grows")):
        with pytest.raises(wk.Invalid) as err:
            await probes.patch("p1", {"status": {"s": value}}, subresource="status")
        assert causes(err) == [
            ("status.s", "FieldValueInvalid", f'Invalid value: "integer": {message}')]


async def test_a_kubernetes_library_function_is_a_named_gap(apiserver: ApiServer) -> None:
    # the simulator only: kube-apiserver has Kubernetes' CEL libraries and accepts this
    apiserver.create_object(_crd("links", "Link", {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"url": {
            "type": "string", "maxLength": 100,
            "x-kubernetes-validations": [_rule("isURL(self)")]}}}}}))
    async with apiserver.client() as client:
        links = client.api("links.example.com", namespace="default")
        with pytest.raises(wk.Invalid) as err:
            await links.create({"apiVersion": "example.com/v1", "kind": "Link",
                                "metadata": {"name": "l"}, "spec": {"url": "https://a.b"}})
    [(field, reason, message)] = causes(err)
    assert (field, reason) == ("spec.url", "FieldValueInvalid")
    assert message.startswith('Invalid value: "string": the simulator cannot evaluate isURL')


async def test_a_crd_whose_rule_does_not_parse_is_refused(apiserver: ApiServer) -> None:
    bad = _crd("bads", "Bad", {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"min": {"type": "integer"}},
        "x-kubernetes-validations": [
            _rule("self.min <="), _rule("self.min > 1", messageExpression="'a' +")]}}})
    expecting = ("Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', "
                 "'!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, "
                 "IDENTIFIER}")
    rules = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations"
    async with apiserver.client() as client:
        crds = client.api("customresourcedefinitions.apiextensions.k8s.io")
        with pytest.raises(wk.Invalid) as err:
            await crds.create(bad)
    assert causes(err) == [
        (f"{rules}[0].rule", "FieldValueInvalid",
         'Invalid value: apiextensions.ValidationRule{Rule:"self.min <=", Message:"", '
         'MessageExpression:"", Reason:(*apiextensions.FieldValueErrorReason)(nil), '
         'FieldPath:""}: compilation failed: ERROR: <input>:1:12: ' + expecting
         + "\n | self.min <=\n | ...........^"),
        (f"{rules}[1].messageExpression", "FieldValueInvalid",
         'Invalid value: apiextensions.ValidationRule{Rule:"self.min > 1", Message:"", '
         "MessageExpression:\"'a' +\", Reason:(*apiextensions.FieldValueErrorReason)(nil), "
         "FieldPath:\"\"}: messageExpression compilation failed: ERROR: <input>:1:6: "
         + expecting + "\n | 'a' +\n | .....^")]


# Kubernetes' strings, lists and regex functions (storage/cellib.py); each rule holds on
# kube-apiserver 1.28.7 for this spec
SPEC = {"s": "Hello, wörld", "l": [1, 2, 3], "u": [3, 1], "w": ["a", "b"]}
LIBRARY = [
    "self.s.charAt(1) == 'e'", "self.s.charAt(12) == ''", "self.s.indexOf('l') == 2",
    "self.s.indexOf('l', 4) == 10", "self.s.indexOf('') == 0", "self.s.lastIndexOf('l') == 10",
    "self.s.lastIndexOf('l', 9) == 3", "self.s.lowerAscii() == 'hello, wörld'",
    "self.s.upperAscii() == 'HELLO, WöRLD'", "self.s.replace('l', 'L') == 'HeLLo, wörLd'",
    "self.s.replace('l', 'L', 1) == 'HeLlo, wörld'", "self.s.split(', ') == ['Hello', 'wörld']",
    "self.s.split('l', 2) == ['He', 'lo, wörld']", "self.s.split('l', 0) == []",
    "'abc'.split('') == ['a', 'b', 'c']", "self.s.substring(7) == 'wörld'",
    "self.s.substring(7, 9) == 'wö'", "'  x y  '.trim() == 'x y'", "self.w.join() == 'ab'",
    "self.w.join('-') == 'a-b'", "self.l.isSorted()", "!self.u.isSorted()",
    "self.l.sum() == 6", "self.u.min() == 1", "self.u.max() == 3", "self.l.indexOf(2) == 1",
    "self.l.lastIndexOf(9) == -1", "self.s.find('[a-z]+') == 'ello'",
    "self.s.findAll('l+') == ['ll', 'l']", "self.s.findAll('l', 1) == ['l']",
    "[1.5, 2.5].sum() == 4.0", "self.w.indexOf('b') == 1",
]
FAILING = [  # and the apiserver's errors for these, with "l": []
    ("self.s.charAt(20) == ''", "index out of range: 20"),
    ("self.s.substring(5, 2) == ''", "invalid substring range. start: 5, end: 2"),
    ("self.l.min() == 0", "min called on empty list"),
    ("self.s.indexOf('l', 30) == 0", "index out of range: 30"),
]


@pytest.mark.parametrize(("spec", "rules", "expected"), [
    (SPEC, LIBRARY, []),
    ({**SPEC, "l": []}, [rule for rule, _ in FAILING],
     [f'Invalid value: "object": {error} evaluating rule: {rule}' for rule, error in FAILING]),
], ids=["hold", "errors"])
async def test_kubernetes_library_functions(apiserver: ApiServer, spec: dict[str, Any],
                                            rules: list[str], expected: list[str]) -> None:
    ints = {"type": "array", "maxItems": 5, "items": {"type": "integer"}}
    apiserver.create_object(_crd("libs", "Lib", {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [_rule(r) for r in rules],
        "properties": {"s": {"type": "string", "maxLength": 20}, "l": ints, "u": ints,
                       "w": {"type": "array", "maxItems": 5,
                             "items": {"type": "string", "maxLength": 3}}}}}}))
    async with apiserver.client() as client:
        libs = client.api("libs.example.com", namespace="default")
        lib = {"apiVersion": "example.com/v1", "kind": "Lib", "metadata": {"name": "x"},
               "spec": spec}
        if not expected:
            assert (await libs.create(lib))["spec"] == spec
            return
        with pytest.raises(wk.Invalid) as err:
            await libs.create(lib)
    assert causes(err) == [("spec", "FieldValueInvalid", message) for message in expected]
