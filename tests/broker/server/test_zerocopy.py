"""File regions sent with sendfile are checked against the bytes read before they are used."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from spindle.broker.server.zerocopy import FileRegion, send_region


def _region(tmp_path: Path) -> tuple[Path, FileRegion]:
    data = os.urandom(300_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    return path, FileRegion(str(path), 1000, 200_000, data[1000:201_000])


def test_unchanged_region_is_used(tmp_path: Path) -> None:
    _, region = _region(tmp_path)
    f = region.open_verified()
    assert f is not None
    f.close()


def test_changed_moved_or_short_files_fall_back_to_the_bytes_read(tmp_path: Path) -> None:
    path, region = _region(tmp_path)
    with path.open("r+b") as f:
        f.seek(region.position + region.length - 1)
        f.write(b"\x00" if region.fallback[-1:] != b"\x00" else b"\x01")
    assert region.open_verified() is None
    os.truncate(path, region.position + 10)
    assert region.open_verified() is None
    path.unlink()
    assert region.open_verified() is None


async def test_send_region_delivers_exactly_the_bytes_read(tmp_path: Path) -> None:
    for change in (False, True):
        path, region = _region(tmp_path)
        if change:
            path.unlink()  # e.g. the segment's directory was renamed by a move
        received = bytearray()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"head")
            await send_region(writer, region)  # noqa: B023
            writer.write(b"tail")
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        received += await reader.read()
        writer.close()
        server.close()
        await server.wait_closed()
        assert bytes(received) == b"head" + region.fallback + b"tail"
