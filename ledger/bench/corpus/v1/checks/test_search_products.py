"""Corpus checks for search_products.py (run by ``ledger bench --corpus`` against each answer)."""

from __future__ import annotations

import asyncio

import pytest
import search_products as sp

DEBOUNCE = 0.02
FAST = {"debounce_s": DEBOUNCE, "backoff_s": 0.001}


class Backend:
    """A fake API over ``total`` products; optional failures, a gate that holds requests open,
    and a record of every call and every cancellation."""

    def __init__(self, total=5, fail_times=0, payload=None, gated=False):
        self.total = total
        self.fail_times = fail_times
        self.payload = payload
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        self.calls = []
        self.cancelled = []

    async def __call__(self, query, offset, limit):
        self.calls.append((query, offset, limit))
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled.append(query)
            raise
        if self.fail_times > 0:
            self.fail_times -= 1
            raise ConnectionError("backend down")
        if self.payload is not None:
            return self.payload
        end = min(offset + limit, self.total)
        return {"items": [{"id": f"{query}-{i}"} for i in range(offset, end)], "total": self.total}

    async def until_calls(self, n):
        while len(self.calls) < n:
            await asyncio.sleep(0.001)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_debounce_fetches_once_for_quick_queries():
    async def main():
        api = Backend()
        s = sp.ProductSearch(api, page_size=2, **FAST)
        for q in ("a", "ab", "abc"):
            s.set_query(q)
        await asyncio.sleep(DEBOUNCE / 4)
        assert api.calls == []
        await s.wait()
        assert api.calls == [("abc", 0, 2)]
        assert [p["id"] for p in s.products] == ["abc-0", "abc-1"]
        assert s.total == 5 and s.has_more and not s.is_loading
    run(main())


def test_empty_query_fetches_nothing():
    async def main():
        api = Backend()
        s = sp.ProductSearch(api, **FAST)
        s.set_query("   ")
        await asyncio.sleep(DEBOUNCE * 2)
        await s.wait()
        assert api.calls == [] and s.products == []
    run(main())


def test_load_more_appends_until_exhausted():
    async def main():
        api = Backend(total=5)
        s = sp.ProductSearch(api, page_size=2, **FAST)
        s.set_query("q")
        await s.wait()
        await s.load_more()
        assert [p["id"] for p in s.products] == ["q-0", "q-1", "q-2", "q-3"]
        await s.load_more()
        assert len(s.products) == 5 and not s.has_more
        calls = len(api.calls)
        await s.load_more()
        assert len(api.calls) == calls
        assert api.calls[1] == ("q", 2, 2)
    run(main())


def test_loading_flags_are_exclusive():
    async def main():
        api = Backend(total=6, gated=True)
        s = sp.ProductSearch(api, page_size=2, **FAST)
        s.set_query("q")
        await api.until_calls(1)
        assert s.is_loading and not s.is_loading_more
        api.gate.set()
        await s.wait()
        api.gate.clear()
        task = asyncio.ensure_future(s.load_more())
        await api.until_calls(2)
        assert s.is_loading_more and not s.is_loading
        api.gate.set()
        await task
        assert not s.is_loading_more and len(s.products) == 4
    run(main())


def test_retries_with_backoff_then_succeeds():
    async def main():
        api = Backend(fail_times=2)
        s = sp.ProductSearch(api, page_size=2, **FAST)
        s.set_query("q")
        await s.wait()
        assert len(api.calls) == 3 and s.error is None and len(s.products) == 2
    run(main())


def test_gives_up_after_max_attempts_and_retry_recovers():
    async def main():
        api = Backend(fail_times=3)
        s = sp.ProductSearch(api, page_size=2, **FAST)
        s.set_query("q")
        await s.wait()
        assert len(api.calls) == 3
        assert isinstance(s.error, ConnectionError) and s.products == []
        await s.retry()
        assert s.error is None and len(s.products) == 2 and len(api.calls) == 4
    run(main())


@pytest.mark.parametrize("payload", [
    {"items": "nope", "total": 1},
    {"items": [{"id": 1}], "total": 1},
    {"items": [], "total": -1},
    {"items": [], "total": True},
    ["not", "a", "dict"],
])
def test_invalid_payload_is_an_error(payload):
    async def main():
        api = Backend(payload=payload)
        s = sp.ProductSearch(api, max_attempts=2, **FAST)
        s.set_query("q")
        await s.wait()
        assert isinstance(s.error, ValueError)
        assert len(api.calls) == 2 and s.products == []
    run(main())


def test_superseded_request_is_cancelled_and_ignored():
    async def main():
        api = Backend(gated=True)
        s = sp.ProductSearch(api, page_size=2, **FAST)
        s.set_query("old")
        await api.until_calls(1)
        s.set_query("new")
        await asyncio.sleep(0)
        api.gate.set()
        await s.wait()
        assert "old" in api.cancelled
        assert [p["id"] for p in s.products] == ["new-0", "new-1"]
    run(main())


def test_close_stops_everything():
    async def main():
        api = Backend(gated=True)
        s = sp.ProductSearch(api, page_size=2, **FAST)
        s.set_query("q")
        s.close()
        await asyncio.sleep(DEBOUNCE * 2)
        assert api.calls == [] and s.products == []
        s2 = sp.ProductSearch(api, page_size=2, **FAST)
        s2.set_query("r")
        await api.until_calls(1)
        s2.close()
        api.gate.set()
        await asyncio.sleep(0.01)
        assert s2.products == [] and "r" in api.cancelled
    run(main())
