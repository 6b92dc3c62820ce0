#!/usr/bin/env python3
"""The backend of `bench/proxy.sh --chunked-response COUNTxSIZE`: answers every request on a
kept-alive connection with one chunked response of COUNT chunks of SIZE bytes, built once and
written at once (an event stream that has arrived whole), so that the proxies' work per
chunk, not the backend's, sets the pace. Listens on 127.0.0.1:PORT; reads and discards each
request head (requests without a body only).

    python3 bench/chunked-backend.py PORT COUNT SIZE
"""
import asyncio
import sys


def response(count: int, size: int) -> bytes:
    chunk = b"%x\r\n" % size + b"x" * size + b"\r\n"
    body = chunk * count + b"0\r\n\r\n"
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + body)


class Connection(asyncio.Protocol):
    def __init__(self, answer: bytes):
        self.answer = answer
        self.pending = b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.pending += data
        while (end := self.pending.find(b"\r\n\r\n")) >= 0:
            self.pending = self.pending[end + 4:]
            self.transport.write(self.answer)


async def main(port: int, count: int, size: int):
    answer = response(count, size)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(answer), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4 or not all(a.isdigit() for a in sys.argv[1:]) or int(sys.argv[3]) < 1:
        sys.exit("usage: chunked-backend.py PORT COUNT SIZE (SIZE at least 1)")
    asyncio.run(main(*map(int, sys.argv[1:])))
