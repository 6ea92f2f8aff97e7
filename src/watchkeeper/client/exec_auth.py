"""Exec credential plugins (kubeconfig ``users[].user.exec``), as client-go runs them.

A plugin is a command that prints an ``ExecCredential`` JSON document with a bearer token
and/or a client certificate, maybe with an expiry (cloud providers' ``*-auth-plugin``s).
We run it with asyncio, never interactively, cache its answer until shortly before it
expires, share one run between concurrent callers, and run it again after a 401.
Its output is secret: errors quote only its exit status and (redacted) stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from watchkeeper.client.auth import header_safe
from watchkeeper.client.errors import ConfigError
from watchkeeper.client.redact import redact_plugin_output
from watchkeeper.supervisor import start_task

__all__ = ["API_VERSIONS", "ExecAuth", "ExecPluginError"]

log = logging.getLogger(__name__)

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
_MODES = ("Never", "IfAvailable", "Always")
_SKEW = 10.0  # seconds: refresh this much before expirationTimestamp
_STDERR_LIMIT = 500
_REMEMBERED = 8  # credentials: a plugin may quote one it returned a few runs ago
DEFAULT_TIMEOUT = 60.0  # seconds; the client's Timeouts.exec_plugin overrides it
_DOCS = "https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins"


class ExecPluginError(ConfigError):
    """The credential plugin could not be run or gave an unusable answer."""


@dataclass(frozen=True)
class _Credential:
    token: str | None = field(repr=False)
    cert: bytes | None = field(repr=False)
    key: bytes | None = field(repr=False)
    expires: float | None  # Unix time, None = until refresh()


class ExecAuth:
    """Bearer token and/or client certificate from an exec credential plugin."""

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        api_version: str = API_VERSIONS[0],
        install_hint: str | None = None,
        provide_cluster_info: bool = False,
        cluster: Mapping[str, Any] | None = None,
        name: str = "exec plugin",
        timeout: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if api_version not in API_VERSIONS:
            raise ConfigError(f"{name}: exec apiVersion must be one of {', '.join(API_VERSIONS)}")
        self._command = command
        self._args = list(args)
        self._env = dict(env or {})
        self._api_version = api_version
        self._install_hint = install_hint
        self._cluster = dict(cluster or {}) if provide_cluster_info else None
        self._name = name
        if timeout is not None and not timeout > 0:
            raise ValueError("the exec plugin timeout must be > 0 seconds")
        self._explicit_timeout = timeout is not None
        self._timeout = timeout if timeout is not None else DEFAULT_TIMEOUT
        self._clock = clock
        self._cached: _Credential | None = None
        # What it returned lately (kept after refresh()): blanked out of its stderr.
        self._returned: deque[_Credential] = deque(maxlen=_REMEMBERED)
        self._running: asyncio.Task[_Credential] | None = None

    @classmethod
    def from_kubeconfig(
        cls, spec: Any, *, where: str, base_dir: Path, cluster: Mapping[str, Any]
    ) -> ExecAuth:
        """Build from a kubeconfig ``exec`` mapping; ``where`` names the user and file."""
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: exec must be a mapping")
        command, api_version = spec.get("command"), spec.get("apiVersion")
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{where}: exec.command is not set")
        if not isinstance(api_version, str) or api_version not in API_VERSIONS:
            raise ConfigError(f"{where}: exec.apiVersion must be one of {', '.join(API_VERSIONS)}")
        args = spec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{where}: exec.args must be a list of strings")
        env: dict[str, str] = {}
        env_list = spec.get("env") or []
        if not isinstance(env_list, list):
            raise ConfigError(f"{where}: exec.env must be a list of name/value mappings")
        for i, item in enumerate(env_list):
            name = item.get("name") if isinstance(item, dict) else None
            value = item.get("value", "") if isinstance(item, dict) else None
            if not isinstance(name, str) or not name or not isinstance(value, str):
                raise ConfigError(f"{where}: exec.env[{i}] needs a name and a string value")
            env[name] = value
        # client-go defaults the mode only for v1beta1; v1 must say it.
        default_mode = "" if api_version == API_VERSIONS[0] else "IfAvailable"
        mode = spec.get("interactiveMode") or default_mode
        if mode not in _MODES:
            raise ConfigError(f"{where}: exec.interactiveMode must be one of {', '.join(_MODES)}")
        if mode == "Always":
            raise ConfigError(
                f"{where}: exec.interactiveMode is Always, but plugins run here without a terminal"
            )
        hint = spec.get("installHint")
        if hint is not None and not isinstance(hint, str):
            raise ConfigError(f"{where}: exec.installHint must be a string")
        provide = spec.get("provideClusterInfo", False)
        if not isinstance(provide, bool):
            raise ConfigError(f"{where}: exec.provideClusterInfo must be true or false")
        if os.sep in command:  # like kubectl: only path-like commands are file-relative
            command = str(base_dir / command)
        return cls(
            command,
            args,
            env,
            api_version=api_version,
            install_hint=hint,
            provide_cluster_info=provide,
            cluster=cluster,
            name=where,
        )

    async def headers(self) -> dict[str, str]:
        cred = await self._credential()
        return {"Authorization": f"Bearer {cred.token}"} if cred.token else {}

    async def client_certificate(self) -> tuple[bytes, bytes] | None:
        """(certificate PEM, key PEM) when the plugin returned a pair, else None."""
        cred = await self._credential()
        return (cred.cert, cred.key) if cred.cert and cred.key else None

    async def refresh(self) -> None:
        self._cached = None

    @property
    def timeout(self) -> float:
        """Seconds one run of the plugin may take before it is killed (ExecPluginError)."""
        return self._timeout

    def default_timeout(self, seconds: float) -> None:
        """The client's ``Timeouts.exec_plugin``; a ``timeout`` given to the constructor wins."""
        if not self._explicit_timeout:
            self._timeout = seconds

    def __repr__(self) -> str:
        return f"ExecAuth(command={self._command!r}, api_version={self._api_version!r})"

    async def _credential(self) -> _Credential:
        """The cached credential, or the result of the one run in progress (started if none)."""
        cred = self._cached
        if cred is not None and (cred.expires is None or self._clock() < cred.expires - _SKEW):
            return cred
        if self._running is None or self._running.done():
            # Awaited: the waiters get its error, retrieved even if every one was cancelled.
            self._running = start_task(self._run(), name="exec credential plugin", awaited=True)
        return await asyncio.shield(self._running)

    async def _run(self) -> _Credential:
        try:
            cred = await self._execute()
            self._cached = cred
            self._returned.append(cred)
            return cred
        finally:
            self._running = None

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self._cluster is not None:
            spec["cluster"] = self._cluster
        return json.dumps({"kind": "ExecCredential", "apiVersion": self._api_version, "spec": spec})

    async def _execute(self) -> _Credential:
        env = {**os.environ, **self._env, "KUBERNETES_EXEC_INFO": self._exec_info()}
        what = f"credential plugin {self._command!r} of {self._name}"
        log.debug("running %s", what)
        try:
            proc = await asyncio.create_subprocess_exec(
                self._command,
                *self._args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except FileNotFoundError:
            hint = f"\n\n{self._install_hint}" if self._install_hint else ""
            raise ExecPluginError(
                f"{what}: executable {self._command!r} not found. It looks like a client-go "
                f"credential plugin that is not installed (see {_DOCS}).{hint}"
            ) from None
        except OSError as exc:
            raise ExecPluginError(f"{what}: cannot run it: {exc.strerror}") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout)
        except BaseException as exc:  # timeout or cancellation: do not leave it running
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
            if isinstance(exc, TimeoutError):
                raise ExecPluginError(f"{what}: no answer within {self._timeout:g} s") from None
            raise
        if proc.returncode != 0:
            raise ExecPluginError(
                f"{what}: exited with code {proc.returncode}{self._stderr_excerpt(out, err)}"
            )
        return self._parse(out, what)

    def _stderr_excerpt(self, out: bytes, err: bytes) -> str:
        """The end of stderr, with any credential the plugin also printed blanked out."""
        text = err.decode(errors="replace").strip()
        if not text:
            return ""
        secrets = [s for c in self._returned
                   for s in (c.token or "", (c.key or b"").decode(errors="replace"))]
        try:
            status = _load_json(out).get("status") or {}
            secrets += [str(status.get(k)) for k in ("token", "clientKeyData") if status.get(k)]
        except (ValueError, AttributeError):
            pass
        text = redact_plugin_output(text, secrets)
        if len(text) > _STDERR_LIMIT:
            text = "..." + text[-_STDERR_LIMIT:]
        return f"; stderr: {text}"

    def _parse(self, out: bytes, what: str) -> _Credential:
        """Check the ExecCredential; messages never quote it (it holds the secret)."""
        try:
            doc = _load_json(out)
        except ValueError:
            raise ExecPluginError(f"{what}: stdout is not JSON (an ExecCredential)") from None
        if not isinstance(doc, dict) or doc.get("kind") != "ExecCredential":
            raise ExecPluginError(f"{what}: stdout is not an ExecCredential object")
        if doc.get("apiVersion") != self._api_version:
            got = doc.get("apiVersion")
            shown = got if got in API_VERSIONS or got is None else "another version"
            raise ExecPluginError(f"{what}: expected apiVersion {self._api_version}, got {shown}")
        status = doc.get("status")
        if not isinstance(status, dict):
            raise ExecPluginError(f"{what}: the ExecCredential has no status")
        fields = ("token", "clientCertificateData", "clientKeyData", "expirationTimestamp")
        for k in fields:
            if status.get(k) is not None and not isinstance(status.get(k), str):
                raise ExecPluginError(f"{what}: status.{k} must be a string")
        token, cert, key, stamp = (status.get(k) or None for k in fields)
        if token is not None and not header_safe(token):
            # it could not be sent: aiohttp refuses CR/LF/NUL, the watch stream non-latin-1
            raise ExecPluginError(
                f"{what}: status.token holds characters an HTTP header cannot carry")
        try:
            cert_pem, key_pem = cert and cert.encode(), key and key.encode()
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON)
            raise ExecPluginError(
                f"{what}: status.clientCertificateData or clientKeyData is not valid text"
            ) from None
        if bool(cert) != bool(key):
            raise ExecPluginError(f"{what}: returned only one of a certificate and its key")
        if not token and not cert:
            raise ExecPluginError(f"{what}: returned neither a token nor a certificate and key")
        expires = None
        if stamp:
            try:
                when = datetime.fromisoformat(stamp)
            except ValueError:
                when = None
            if when is None or when.tzinfo is None:
                raise ExecPluginError(f"{what}: status.expirationTimestamp is not RFC 3339")
            expires = when.timestamp()
        log.debug("%s returned a credential (expires %s)", what, stamp or "never")
        return _Credential(token, cert_pem, key_pem, expires)


def _load_json(data: bytes) -> Any:
    """``json.loads``, with nesting too deep to decode reported as the ValueError it is
    (an ExecCredential is four levels deep; a RecursionError must not escape)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
