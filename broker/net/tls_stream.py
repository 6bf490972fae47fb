"""The server side of TLS over a Trio stream, for connections owned by one task.

trio.SSLStream returns at most one TLS record per `receive_some` and passes through
the scheduler each time; librdkafka writes a record per message segment (about 1 KiB
for 1 KiB values), so a 1 MB produce request took some 800 trips through it. A
processor's connection is only ever read and written by its own task, one after the
other, so this stream can drop SSLStream's locks and conflict detectors and hand out
everything already decrypted in one call: the whole of it is `ssl.SSLObject` over two
memory BIOs, moving bytes between them and the transport.
"""

from __future__ import annotations

import contextlib
import ssl

import trio

_TRANSPORT_RECEIVE = 256 * 1024


class HandshakeEof(trio.BrokenResourceError):
    """The peer closed before the handshake finished (port probes, health checks): not
    a failed authentication, as in Kafka, where only TLS errors count as one."""


class TlsServerStream(trio.abc.Stream):
    """TLS on `transport`; failures surface as trio.BrokenResourceError (cause chained)."""

    def __init__(self, transport: trio.abc.Stream, context: ssl.SSLContext) -> None:
        self.transport = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._closed_by_peer = False

    # -- the handshake --------------------------------------------------------------------
    async def do_handshake(self) -> None:
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise HandshakeEof("connection closed during the TLS handshake") from None
                continue
            except ssl.SSLError as exc:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await self._flush()  # the alert tells the client why
                raise trio.BrokenResourceError(f"TLS handshake failed: {exc}") from exc
            await self._flush()
            return

    def getpeercert(self, binary_form: bool = True) -> bytes | None:
        return self._ssl.getpeercert(binary_form=True)

    def cipher(self) -> tuple[str, str, int] | None:
        return self._ssl.cipher()

    def version(self) -> str | None:
        return self._ssl.version()

    # -- data -------------------------------------------------------------------------------
    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Everything decrypted so far (up to `max_bytes`), waiting only when nothing is."""
        limit = max_bytes or _TRANSPORT_RECEIVE
        while True:
            chunks: list[bytes] = []
            size = 0
            try:
                while size < limit:
                    chunk = self._ssl.read(limit - size)
                    if not chunk:  # the peer's close_notify (want-more-data raises instead)
                        self._closed_by_peer = True
                        self._answer_close_notify()
                        break
                    chunks.append(chunk)
                    size += len(chunk)
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLZeroReturnError:
                self._closed_by_peer = True
                self._answer_close_notify()
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(f"TLS error: {exc}") from exc
            if self._outgoing.pending:  # post-handshake messages (key updates, alerts)
                await self._flush()
            if chunks:
                return b"".join(chunks)
            if self._closed_by_peer or not await self._fill():
                return b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        try:
            self._ssl.write(data)
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(f"TLS error: {exc}") from exc
        await self._flush()

    def encrypt(self, data: bytes) -> bytes:
        """`data` as TLS records (with anything already pending), for a caller that
        writes them to the transport itself (a delayed close after a failed login)."""
        try:
            if data:
                self._ssl.write(data)
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(f"TLS error: {exc}") from exc
        return self._outgoing.read()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.transport.aclose()

    def _answer_close_notify(self) -> None:
        """The peer's close_notify gets ours (flushed with the next write to the transport):
        asyncio clients wait for it, up to 30 s, before they consider the connection shut."""
        with contextlib.suppress(ssl.SSLError):
            self._ssl.unwrap()

    # -- the transport ---------------------------------------------------------------------
    async def _flush(self) -> None:
        if self._outgoing.pending:
            await self.transport.send_all(self._outgoing.read())

    async def _fill(self) -> bool:
        """More bytes from the transport into the TLS engine; False at end of stream."""
        data = await self.transport.receive_some(_TRANSPORT_RECEIVE)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True
