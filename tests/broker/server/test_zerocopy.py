"""File regions are sent with sendfile from a held descriptor: exactly their bytes, even after
the file was unlinked; a file cut short under the region fails the send instead of lying."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from spindle.broker.server.zerocopy import FileRegion, ShortSend, close_regions, send_region
from spindle.broker.storage import FileRange


def _region(tmp_path: Path) -> tuple[Path, bytes, FileRegion]:
    data = os.urandom(300_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return path, data[1000:201_000], FileRegion(FileRange(fd, 1000, 200_000))


async def _serve_once(send: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> bytes:
    """Bytes a client receives from a server that writes ``head``, calls ``send``, ``tail``."""
    errors: list[BaseException] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            writer.write(b"head")
            await send(writer)
            writer.write(b"tail")
            await writer.drain()
        except Exception as exc:
            errors.append(exc)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = await reader.read()
    writer.close()
    server.close()
    await server.wait_closed()
    if errors:
        raise errors[0]
    return received


async def test_send_region_delivers_exactly_its_bytes_even_after_the_file_is_unlinked(
    tmp_path: Path,
) -> None:
    for unlink in (False, True):
        path, expected, region = _region(tmp_path)
        if unlink:
            path.unlink()  # e.g. a move swapped the replica and deleted the old directory
        received = await _serve_once(lambda w: send_region(w.transport, region))  # noqa: B023
        assert received == b"head" + expected + b"tail"
        close_regions([b"x", region])
        assert region.range.closed


async def test_a_file_cut_short_under_the_region_fails_the_send(tmp_path: Path) -> None:
    path, _, region = _region(tmp_path)
    os.truncate(path, 50_000)
    with pytest.raises(ShortSend):
        await _serve_once(lambda w: send_region(w.transport, region))
    region.close()
