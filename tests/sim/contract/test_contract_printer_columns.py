"""Issue 22, case 4: additionalPrinterColumns with client-go JSONPath (filters, recursive
descent, wildcards, unions, slices), replayed from tests/fixtures/apiserver-1.28-issue22
files 059-062: the same columns and the same cells (the age of a date column aside)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from ._issue22 import World, send, want, world

AGE = re.compile(r"^(\d+y)?\d+d$")  # "6y340d" on the capture's day


@pytest.fixture
async def cases4() -> AsyncIterator[World]:
    async for w in world("cases-4"):
        yield w


async def test_printer_columns_with_jsonpath_filters(cases4: World) -> None:
    srv, session = cases4
    for number in (59, 60):  # the CRD (its columns), then the custom resource
        status, body, _ = await send(srv, session, number)
        assert status == 201, body
    for number in (61, 62):  # the list, then one object
        status, table, _ = await send(srv, session, number)
        expected = want(number)
        assert status == 200 and table["kind"] == "Table"
        # "Broken" does not parse: it and every column after it are left out
        assert table["columnDefinitions"] == expected["columnDefinitions"]
        names = [c["name"] for c in table["columnDefinitions"]]
        got, real = table["rows"][0]["cells"], expected["rows"][0]["cells"]
        when = names.index("When")
        assert AGE.match(got[when]) and AGE.match(real[when])
        for name, cell, expected_cell in zip(names, got, real, strict=True):
            if name != "When":
                assert cell == expected_cell, name
