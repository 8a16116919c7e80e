"""A TCP proxy on loopback that holds each direction's bytes for a fixed time: a network's latency
between a client and a daemon on one machine (bench/latency_bench.py).

    /usr/bin/python3 bench/latency_proxy.py --to unix:/path/to/polygradd.sock --delay-ms 1

It listens on 127.0.0.1 (an ephemeral port unless --port), prints `listening <port>` once it
accepts, and forwards every chunk `delay` after it read it, in order, each direction on its own:
a round trip costs twice the delay. Bandwidth is not limited. Upstream is `host:port` or
`unix:/path`. Runs until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
  """Copies reader to writer, each chunk held until `delay` after it arrived."""
  loop = asyncio.get_running_loop()
  held: asyncio.Queue = asyncio.Queue()

  async def deliver() -> None:
    while True:
      due, data = await held.get()
      wait = due - loop.time()
      if wait > 0:
        await asyncio.sleep(wait)
      if not data:
        break
      writer.write(data)
      await writer.drain()
    if writer.can_write_eof():
      writer.write_eof()

  task = asyncio.create_task(deliver())
  try:
    while True:
      data = await reader.read(1 << 16)
      held.put_nowait((loop.time() + delay, data))
      if not data:
        break
    await task
  except (ConnectionError, asyncio.CancelledError):
    task.cancel()


async def _open_upstream(target: str):
  if target.startswith("unix:"):
    return await asyncio.open_unix_connection(target[len("unix:"):])
  host, _, port = target.rpartition(":")
  return await asyncio.open_connection(host, int(port))


async def _serve(target: str, delay: float, port: int) -> None:
  async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
      up_reader, up_writer = await _open_upstream(target)
    except OSError:
      writer.close()
      return
    await asyncio.gather(_pump(reader, up_writer, delay), _pump(up_reader, writer, delay), return_exceptions=True)
    for w in (writer, up_writer):
      w.close()

  server = await asyncio.start_server(connection, "127.0.0.1", port)
  print("listening", server.sockets[0].getsockname()[1], flush=True)
  async with server:
    await server.serve_forever()


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--to", required=True, help="upstream: host:port or unix:/path")
  ap.add_argument("--delay-ms", type=float, default=0.0, help="added to each direction (ms)")
  ap.add_argument("--port", type=int, default=0)
  args = ap.parse_args()
  if args.delay_ms < 0:
    sys.exit("--delay-ms must be >= 0")
  try:
    asyncio.run(_serve(args.to, args.delay_ms / 1000.0, args.port))
  except KeyboardInterrupt:
    pass


if __name__ == "__main__":
  main()
