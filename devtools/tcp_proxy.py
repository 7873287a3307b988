"""A TCP proxy that can be cut, for fault tests: `TcpProxy(target_port).start()` listens on a
free port of 127.0.0.1 and forwards to the target; `cut()` closes every connection through it
and stops listening (clients see their connection reset and new ones refused), `restore()`
listens again on the same port. Runs its own event loop on a daemon thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from devtools.live_server import free_port


class TcpProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="tcp-proxy")
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    def start(self) -> TcpProxy:
        self.thread.start()
        self.restore()
        return self

    def restore(self) -> None:
        """Listen (again) on `port`."""
        self._call(self._listen())

    def cut(self) -> None:
        """Stop listening and close every open connection, both ways."""
        self._call(self._cut())

    def stop(self) -> None:
        self.cut()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def _call(self, coro: object) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)  # type: ignore[arg-type]

    async def _listen(self) -> None:
        if self.server is None:
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port,
                                                     reuse_address=True)

    async def _cut(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.writers.discard(writer)
            with contextlib.suppress(OSError, RuntimeError):
                writer.transport.abort()
