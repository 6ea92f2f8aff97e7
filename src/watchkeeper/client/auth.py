"""Credential providers: how a request gets its Authorization header.

A provider is asked for headers before every request and told to ``refresh`` after a 401,
so rotating credentials (bound service-account tokens, exec plugins) keep working without
a restart. Providers never put a secret in ``repr`` or in an exception.
"""

from __future__ import annotations

import base64
from typing import Protocol, runtime_checkable


@runtime_checkable
class Auth(Protocol):
    async def headers(self) -> dict[str, str]:
        """Headers to add to the next request (may run a plugin or read a file)."""
        ...

    async def refresh(self) -> None:
        """Called after a 401: drop cached credentials so the next ``headers`` gets fresh ones."""
        ...


class NoAuth:
    async def headers(self) -> dict[str, str]:
        return {}

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return "NoAuth()"


class StaticToken:
    """A bearer token given inline (kubeconfig ``token``)."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"}

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return "StaticToken(<redacted>)"


class BasicAuth:
    """Username and password (kubeconfig ``username``/``password``)."""

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._value = base64.b64encode(f"{username}:{password}".encode()).decode()

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Basic {self._value}"}

    async def refresh(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"BasicAuth(username={self._username!r}, password=<redacted>)"
