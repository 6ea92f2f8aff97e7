"""A broken kubeconfig is a ConfigError naming the file and the place, never a value from it
(it may be a password or a token), and never a TypeError/AttributeError/KeyError."""

from __future__ import annotations

import copy
import secrets
import string
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from watchkeeper.client.config import ClientConfig, ConfigError, load_kubeconfig

PASSWORD = "!Passw0rd-" + secrets.token_hex(6)
TOKEN = "tok-" + secrets.token_hex(12)


def kubeconfig_text(user: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters:\n- name: k\n  cluster:\n    server: http://127.0.0.1:1\n"
        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
        f"users:\n- name: u\n  user:\n{user}"
    )


def load_text(tmp_path: Path, text: str) -> ClientConfig:
    path = tmp_path / "config"
    path.write_text(text)
    return load_kubeconfig([path])


@pytest.mark.parametrize(
    "user, where",
    [
        (f"    username: bob\n    password: {PASSWORD}\n", 1),  # a tag: !Passw0rd...
        (f"    token: !!binary {TOKEN}\n", 0),  # not base64: a constructor error
        (f"    token: !!int {TOKEN}\n", 0),  # int("tok-...")
        (f"    token: !!float {TOKEN}\n", 0),
        (f"    token: !!timestamp {TOKEN}\n", 0),
        (f"    token: {TOKEN}\n    tokenFile: &a [*b]\n", 1),  # undefined alias
        (f"    token: \"{TOKEN}\\q\"\n", 0),  # an unknown escape in a quoted string
        (f"    token: '{TOKEN}\n", None),  # unterminated quote: the rest of the file
        (f"    password: {PASSWORD}\t{TOKEN}: x\n", 0),
        ("    password: 2001-02-30\n", 0),  # a timestamp that is no date: ValueError
        (f"    token: {{{TOKEN}: [1, {{a: }}\n", None),
        (f"    ? [{TOKEN}]\n    : x\n", 0),  # a list as a key: unhashable
    ],
)
def test_yaml_errors_quote_no_value(tmp_path: Path, user: str, where: int | None) -> None:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, kubeconfig_text(user))
    message = str(info.value)
    assert str(tmp_path / "config") in message and " at line " in message
    if where is not None:  # the user's first line is the one after the header
        assert f" at line {len(kubeconfig_text('').splitlines()) + 1 + where}," in message
    for secret in (PASSWORD, TOKEN, PASSWORD[1:], TOKEN[4:], "2001-02-30"):
        assert secret not in message, message
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_deeply_nested_yaml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_text(tmp_path, kubeconfig_text("    token: " + "[" * 5000 + "]" * 5000 + "\n"))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["clusters"][0]["cluster"].__setitem__("extensions", 5),
        lambda d: d["clusters"][0]["cluster"].__setitem__("extensions", [5, "x"]),
        lambda d: d["clusters"][0]["cluster"].__setitem__("extensions", {"a": 1}),
        lambda d: d["users"][0]["user"]["exec"].__setitem__("env", 5),
        lambda d: d["users"][0]["user"]["exec"].__setitem__("env", {"a": "b"}),
        lambda d: d["users"][0]["user"]["exec"].__setitem__("provideClusterInfo", "yes"),
        lambda d: d["users"][0]["user"]["exec"].__setitem__("installHint", 5),
        lambda d: d["users"][0]["user"].__setitem__("exec", [1]),
        lambda d: d["users"][0]["user"].__setitem__("auth-provider", 5),
        lambda d: d.__setitem__("contexts", {"c": 1}),
        lambda d: d["contexts"][0].__setitem__("name", 5),
        lambda d: d["contexts"][0].__setitem__("context", [1]),
        lambda d: d.__setitem__("current-context", ["c"]),
        lambda d: d.__setitem__("users", [5]),
        lambda d: d["users"][0]["user"].__setitem__("as-user-extra", {"k": "v"}),
    ],
)
def test_malformed_structure_is_a_config_error(tmp_path: Path, mutate: Any) -> None:
    doc = exec_doc()
    mutate(doc)
    (tmp_path / "config").write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as info:
        load_kubeconfig([tmp_path / "config"])
    assert str(tmp_path / "config") in str(info.value)


def exec_doc() -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {
            "server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True,
            "extensions": [{"name": "client.authentication.k8s.io/exec",
                            "extension": {"audience": "x"}}]}}],
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u",
                                               "namespace": "n"}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "plugin",
            "args": ["--token", TOKEN], "env": [{"name": "PASS", "value": PASSWORD}],
            "interactiveMode": "Never", "provideClusterInfo": True}}}],
    }


def token_doc() -> dict[str, Any]:
    doc = exec_doc()
    doc["users"][0]["user"] = {"token": TOKEN, "as": "alice", "as-groups": ["g"],
                               "as-user-extra": {"k": ["v"]}}
    return doc


def basic_doc() -> dict[str, Any]:
    doc = exec_doc()
    doc["users"][0]["user"] = {"username": "bob", "password": PASSWORD}
    return doc


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document a value can be replaced at."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


# Secrets stay where they are (a password used as a context name would be shown as a name).
SCALARS = (st.none() | st.booleans() | st.integers(-5, 10**20) | st.floats(allow_nan=False)
           | st.text(string.printable, max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(string.ascii_letters, max_size=6), inner,
                                        max_size=3), max_leaves=6)
DOCS = {"exec": exec_doc, "token": token_doc, "basic": basic_doc}


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(DOCS)), st.data())
def test_fuzzed_kubeconfig_shapes(tmp_path: Path, kind: str, data: st.DataObject) -> None:
    """Replace up to three values anywhere with values of any type: the result loads or is
    a ConfigError; no other exception, and no secret in the message."""
    doc = copy.deepcopy(DOCS[kind]())
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(paths(doc)))
        target = doc
        for step in where[:-1]:
            target = target[step]
        target[where[-1]] = data.draw(VALUES)
    path = tmp_path / "fuzz"
    path.write_text(yaml.safe_dump(doc))
    try:
        load_kubeconfig([path])
    except ConfigError as exc:
        message = str(exc)
        assert PASSWORD not in message and TOKEN not in message, message
