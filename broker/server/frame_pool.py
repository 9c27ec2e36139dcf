"""Buffers for large request frames, taken back once nothing refers to them any more.

A frame too large for a connection's small buffer (a produce request of ~1 MB) is received
into a buffer of its own. A new ``bytearray`` is zero-filled first and, being fresh memory,
page-faulted in as the socket fills it: profiled under a produce load of 1 MB requests that
was ~55 us a request (cProfile, ``_split_frames``), 6-8 % of the broker's CPU, for bytes the
socket overwrites at once. The pool hands a finished frame's buffer to the next large frame
instead, resized in place (no zero-fill of what it already has, no new pages).

A buffer comes back only when its last user is done with it: the connection offers the frame
after answering the request, and the pool takes it only if the offer holds the only
references left (``sys.getrefcount``). Anything still holding the frame or a view of it --
a record set a handler kept, a waiting acks=all request -- counts as a reference (a
``memoryview`` keeps its buffer's object alive), so such a frame is simply left to the
garbage collector. Stale bytes are never seen: a frame is handed on only once the socket has
filled every byte of it.

At most :data:`POOL_BUFFERS` buffers of at most :data:`POOL_MAX_BYTES` each are kept, shared
by every connection of the broker (event loop only: no locking), so the pool costs a few
megabytes whatever the number of producers.
"""

from __future__ import annotations

import sys

POOL_BUFFERS = 8
"""Idle buffers kept (a pipelining producer has about four large frames alive at once)."""
POOL_MAX_BYTES = 4 << 20
"""Larger frames get a buffer of their own each time and are not kept."""
_OFFER_REFS = 3
"""``sys.getrefcount`` of a buffer held only by :meth:`FramePool.give`'s caller: the
caller's variable, the parameter and ``getrefcount``'s own argument."""


class FramePool:
    """Frame buffers to reuse (module docstring). Event loop only."""

    def __init__(self, buffers: int = POOL_BUFFERS, max_bytes: int = POOL_MAX_BYTES) -> None:
        self._free: list[bytearray] = []
        self._buffers = buffers
        self._max_bytes = max_bytes
        self.reused = 0
        """Frames that got a pooled buffer (tests, diagnostics)."""

    def take(self, size: int) -> bytearray:
        """A buffer of exactly ``size`` bytes; its contents are undefined."""
        if size <= self._max_bytes and self._free:
            buf = self._free.pop()
            have = len(buf)
            if have > size:
                del buf[size:]
            elif have < size:
                buf.extend(bytes(size - have))
            self.reused += 1
            return buf
        return bytearray(size)

    def give(self, buf: bytearray) -> bool:
        """Offer a finished frame's buffer; kept (True) only if nothing else refers to it."""
        if (
            len(buf) > self._max_bytes
            or len(self._free) >= self._buffers
            or sys.getrefcount(buf) > _OFFER_REFS
        ):
            return False
        self._free.append(buf)
        return True
