"""Fixtures of the client tests that play a server by hand (``rawserver.RawServer``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import watchkeeper as wk

from .rawserver import RawServer


@pytest.fixture
async def raw() -> AsyncIterator[RawServer]:
    """A raw HTTP server on 127.0.0.1 whose answers a test writes byte by byte."""
    async with RawServer() as srv:
        yield srv


@pytest.fixture
async def client(raw: RawServer) -> AsyncIterator[wk.Client]:
    """A Client of ``raw``, plain HTTP, no credentials."""
    async with wk.Client(wk.ClientConfig(server=raw.url)) as c:
        yield c
