"""File regions are sent with sendfile from a held descriptor: exactly their bytes, even after
the file was unlinked; a file cut short under the region fails the send instead of lying. A
whole answer (bytes and regions) arrives in order, whether the socket is written directly or
through the transport's buffer."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from spindle.broker.server.zerocopy import (
    FileRegion,
    ShortSend,
    close_regions,
    send_parts,
    send_region,
)
from spindle.broker.storage import FileRange


def _region(tmp_path: Path) -> tuple[Path, bytes, FileRegion]:
    data = os.urandom(300_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    return path, data[1000:201_000], FileRegion(FileRange(fd, 1000, 200_000))


async def _slow_read(reader: asyncio.StreamReader) -> bytes:
    """Everything until EOF, in small reads with pauses: the sender's socket fills up."""
    out = bytearray()
    reads = 0
    while chunk := await reader.read(64 << 10):
        out += chunk
        reads += 1
        if reads <= 20:
            await asyncio.sleep(0.001)
    return bytes(out)


async def _serve_once(
    send: Callable[[asyncio.StreamWriter], Awaitable[None]],
    *,
    head: bytes = b"head",
    send_buffer: int | None = None,
) -> bytes:
    """Bytes a client receives (slowly at first: :func:`_slow_read`) from a server that
    writes ``head``, calls ``send``, writes ``tail``; ``send_buffer`` sets its SO_SNDBUF."""
    errors: list[BaseException] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if send_buffer is not None:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        try:
            writer.write(head)
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
    received = await _slow_read(reader)
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


async def _answer(tmp_path: Path, *, unsent_before: bytes) -> tuple[bytes, bytes]:
    """What a client receives when the server writes ``unsent_before`` through the transport
    and then sends an answer of three 1.5 MB file regions between bytes (send buffer 64 KiB,
    a slow reader), and the bytes it expected."""
    data = os.urandom(5_000_000)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    spans = [(0, 1_500_000), (1_700_000, 1_500_000), (3_400_000, 1_500_000)]
    regions = [FileRegion(FileRange(os.open(path, os.O_RDONLY), p, n)) for p, n in spans]
    parts: list[object] = [b"size", b"head0"]
    expected = unsent_before + b"sizehead0"
    for i, (region, (p, n)) in enumerate(zip(regions, spans, strict=True)):
        parts += [region, f"between{i}".encode()]
        expected += data[p : p + n] + f"between{i}".encode()
    try:
        received = await _serve_once(
            lambda w: send_parts(w.transport, parts), head=unsent_before, send_buffer=65536
        )
    finally:
        close_regions(parts)
    assert all(r.range.closed for r in regions)
    return received, expected + b"tail"


async def test_an_answer_of_bytes_and_regions_arrives_whole_and_in_order_through_a_full_socket(
    tmp_path: Path,
) -> None:
    received, expected = await _answer(tmp_path, unsent_before=b"")
    assert len(received) == len(expected)
    assert received == expected


async def test_bytes_still_buffered_in_the_transport_go_out_before_the_answer(
    tmp_path: Path,
) -> None:
    # 8 MB written through the transport cannot all leave at once: the answer must wait.
    earlier = os.urandom(8_000_000)
    received, expected = await _answer(tmp_path, unsent_before=earlier)
    assert len(received) == len(expected)
    assert received == expected


async def test_a_file_cut_short_under_an_answers_region_fails_its_send(tmp_path: Path) -> None:
    path, _, region = _region(tmp_path)
    os.truncate(path, 50_000)
    with pytest.raises(ShortSend):
        await _serve_once(lambda w: send_parts(w.transport, [b"x", region, b"y"]))
    region.close()


async def test_a_client_gone_in_the_middle_of_an_answer_fails_its_send_instead_of_hanging(
    tmp_path: Path,
) -> None:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(os.urandom(8_000_000))
    region = FileRegion(FileRange(os.open(path, os.O_RDONLY), 0, 8_000_000))
    outcome: list[BaseException | None] = []
    finished = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
        try:
            await asyncio.wait_for(send_parts(writer.transport, [b"head", region]), 10)
            outcome.append(None)
        except Exception as exc:
            outcome.append(exc)
        finally:
            writer.close()
            finished.set()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        await reader.readexactly(100_000)  # the answer is under way, the socket full again
        writer.transport.abort()  # unread bytes: the kernel answers the next segment with RST
        await asyncio.wait_for(finished.wait(), 10)
    finally:
        region.close()
        server.close()
        await server.wait_closed()
    assert isinstance(outcome[0], ConnectionError), outcome
