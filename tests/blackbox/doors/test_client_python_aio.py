"""The asyncio variant of the Python client (clients/python/abx/aio.py) against a real
server: found like abx.Client, the same attribute tree and argument checks, errors as
AbxError subclasses, bytes as bytes, uploads, SSE as an async iterator that yields events
as they arrive, and calls that run concurrently."""
import asyncio
import os
import sys
import time

import pytest

from abxtest import ALICE_TOKEN, BOB_TOKEN

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "..", "clients", "python"))
import abx as abxc  # noqa: E402  (the client package, not the server fixture)
import abx.aio as aio  # noqa: E402


@pytest.fixture
def local(server, monkeypatch):
    monkeypatch.setenv("ABX_HOME", server.home)
    monkeypatch.delenv("ABX_URL", raising=False)
    monkeypatch.delenv("ABX_TOKEN", raising=False)
    deadline = time.time() + 5
    while abxc.default_url() != server.url and time.time() < deadline:
        time.sleep(0.02)
    return server


def run(coro):
    return asyncio.run(coro)


def test_connect_finds_the_local_server_and_calls(local, workspace):
    async def main():
        async with await aio.AsyncClient.connect() as c:
            assert c.url == local.url and c.token == local.token
            assert "files.read" in c.ops and "list" in dir(c.files)
            r = await c.files.read(path="a.txt")
            by_id = await c.call("files.read", path="a.txt")
            by_tool = await c.call("files__read", path="a.txt")
            return r, by_id, by_tool
    r, by_id, by_tool = run(main())
    assert r["content"] == by_id["content"] == by_tool["content"] == "hello\n"
    lines = [ln for ln in local.log_lines() if ln.get("op") == "files.read"]
    assert lines[-1]["client"].startswith("python-asyncio/")


def test_not_connected_and_argument_checks(local):
    async def main():
        c = aio.AsyncClient()
        with pytest.raises(abxc.TransportError) as ei:
            await c.call("files.read", path="a.txt")
        assert ei.value.code == "client.not_connected"
        await c.refresh()
        before = len(local.log_lines())
        for args, code in (({"pathh": "a.txt"}, "args.unknown"), ({}, "args.missing"),
                           ({"path": "a.txt", "max_lines": "5"}, "args.invalid")):
            with pytest.raises(abxc.ArgumentError) as ei:
                await c.files.read(**args)
            assert ei.value.code == code
        assert len(local.log_lines()) == before  # nothing reached the server
    run(main())


def test_server_errors_become_abx_errors(local, workspace):
    async def main():
        c = await aio.AsyncClient.connect()
        with pytest.raises(abxc.NotFoundError) as ei:
            await c.files.read(path="nope.txt")
        assert (ei.value.code, ei.value.status, ei.value.op) == ("files.not_found", 404, "files.read")
        assert "nope.txt" in ei.value.message and ei.value.request_id
        with pytest.raises(abxc.PolicyError) as ei:
            await c.files.read(path="/etc/hostname")
        assert ei.value.code == "policy.path_not_allowed"
        with pytest.raises(abxc.AuthError):
            await aio.AsyncClient.connect(token="x" * 64)
    run(main())


def test_unreachable_is_a_transport_error(tmp_path):
    from abxtest import free_port

    async def main():
        with pytest.raises(abxc.TransportError) as ei:
            await aio.AsyncClient.connect(url="http://127.0.0.1:%d" % free_port(), token="t")
        assert ei.value.code == "client.unreachable"
    run(main())


def test_contract_mismatch(multi):
    async def main():
        bob = await aio.AsyncClient.connect(url=multi.url, token=BOB_TOKEN)
        with pytest.raises(abxc.ContractMismatchError):
            await bob.call("files.read", path="a.txt")
        alice = await aio.AsyncClient.connect(url=multi.url, token=ALICE_TOKEN)
        return await alice.files.read(path="a.txt")
    assert run(main())["content"] == "hello\n"


def test_bytes_upload_and_concurrent_calls(local, workspace):
    with open(os.path.join(workspace, "bin.dat"), "wb") as f:
        f.write(bytes(range(256)) * 300)

    async def main():
        c = await aio.AsyncClient.connect()
        got = await c.files.download(path="bin.dat")
        up = await c.files.upload(b"\x00\x01up", path="up.bin")
        t0 = time.time()
        many = await asyncio.gather(*(c.commands.run(argv=["sleep", "1"]) for _ in range(3)))
        return got, up, many, time.time() - t0
    got, up, many, took = run(main())
    assert got == bytes(range(256)) * 300
    assert up["bytes_written"] == 4
    assert [m["exit_code"] for m in many] == [0, 0, 0]
    assert took < 2.5, took  # three one-second commands side by side, not one after another
    with open(os.path.join(workspace, "up.bin"), "rb") as f:
        assert f.read() == b"\x00\x01up"


def test_sse_is_an_async_iterator_read_as_it_arrives(local):
    async def main():
        c = await aio.AsyncClient.connect()
        async with await c.commands.stream(argv=["sh", "-c", "echo one; echo two >&2"]) as s:
            events = [e async for e in s]
        t0 = time.time()
        s = await c.commands.stream(argv=["sh", "-c", "echo first; sleep 5; echo late"])
        first = [await s.__anext__(), await s.__anext__()]
        early = time.time() - t0
        await s.aclose()
        rest = [e async for e in s]
        return events, first, early, rest
    events, first, early, rest = run(main())
    assert events[0].event == "start" and events[-1].event == "exit"
    assert "".join(e.data["data"] for e in events if e.event == "stdout") == "one\n"
    assert "".join(e.data["data"] for e in events if e.event == "stderr") == "two\n"
    assert events[-1].data["exit_code"] == 0
    assert [e.event for e in first] == ["start", "stdout"] and first[1].data["data"] == "first\n"
    assert early < 4 and rest == []
