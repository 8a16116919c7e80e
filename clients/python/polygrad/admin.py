"""Operator helpers for polygradd's PolygradAdmin service: kernel-cache stats, export and import
of cache bundles, prewarm from a manifest.

    python -m polygrad.admin --address unix:/run/polygradd.sock stats
    python -m polygrad.admin --address HOST:PORT export bundle.pgb
    python -m polygrad.admin --address HOST:PORT import bundle.pgb
    python -m polygrad.admin --address HOST:PORT prewarm manifest.txtpb [--tune]

The admin token (when the daemon requires one) comes from --token or POLYGRAD_ADMIN_TOKEN and
is sent as ``authorization: Bearer <token>``. A bundle file is the magic ``PGKBNDL1`` followed by
CacheEntry messages, each preceded by its length (4 bytes, little-endian).
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from typing import BinaryIO, Iterator, Optional

import grpc

from . import wire

BUNDLE_MAGIC = b"PGKBNDL1"
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


class Admin:
  """A PolygradAdmin stub on its own channel."""

  def __init__(self, address: str, token: Optional[str] = None):
    self.channel = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
    self.stub = wire.admin_stub(self.channel)
    token = token if token is not None else os.environ.get("POLYGRAD_ADMIN_TOKEN")
    self.metadata = [("authorization", f"Bearer {token}")] if token else []

  def close(self) -> None:
    self.channel.close()

  def __enter__(self) -> "Admin":
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def cache_stats(self):
    return self.stub.CacheStats(wire.cache_stats(), metadata=self.metadata)

  def export_cache(self, out: BinaryIO) -> int:
    """Writes every cache entry to `out` as a bundle; returns how many."""
    out.write(BUNDLE_MAGIC)
    n = 0
    for entry in self.stub.ExportCache(wire.export_cache(), metadata=self.metadata):
      data = entry.SerializeToString()
      out.write(struct.pack("<I", len(data)))
      out.write(data)
      n += 1
    return n

  def import_cache(self, bundle: BinaryIO):
    """Sends a bundle written by export_cache; returns the ImportCacheResponse."""
    return self.stub.ImportCache(read_bundle(bundle), metadata=self.metadata)

  def prewarm(self, manifest, timeout: Optional[float] = None, tune: bool = False):
    """Compiles the manifest's kernels into the cache; with `tune`, also searches the tilings of
    those that have no stored choice (whatever the daemon's --tune) and stores the fastest."""
    if tune and not manifest.tune:
      copy = type(manifest)()
      copy.CopyFrom(manifest)
      copy.tune = True
      manifest = copy
    return self.stub.Prewarm(manifest, metadata=self.metadata, timeout=timeout)


def read_bundle(f: BinaryIO) -> Iterator:
  if f.read(len(BUNDLE_MAGIC)) != BUNDLE_MAGIC:
    raise ValueError("not a polygrad cache bundle (bad magic)")
  while True:
    head = f.read(4)
    if not head:
      return
    if len(head) != 4:
      raise ValueError("truncated cache bundle")
    (size,) = struct.unpack("<I", head)
    data = f.read(size)
    if len(data) != size:
      raise ValueError("truncated cache bundle")
    yield wire.cache_entry(data)


def load_manifest(path: str):
  """A PrewarmManifest from a file, read the way the daemon reads --prewarm."""
  with open(path, "rb") as f:
    data = f.read()
  return wire.prewarm_manifest(data, text=not path.endswith((".pb", ".binpb")))


def main(argv=None) -> int:
  p = argparse.ArgumentParser(prog="python -m polygrad.admin", description=__doc__.split("\n\n")[0])
  p.add_argument("--address", default=os.environ.get("POLYGRAD_ADDRESS"), required=not os.environ.get("POLYGRAD_ADDRESS"))
  p.add_argument("--token", default=None)
  sub = p.add_subparsers(dest="cmd", required=True)
  sub.add_parser("stats")
  sub.add_parser("export").add_argument("file")
  sub.add_parser("import").add_argument("file")
  pw = sub.add_parser("prewarm")
  pw.add_argument("manifest")
  pw.add_argument("--tune", action="store_true", help="also search tilings with no stored choice, and store them")
  args = p.parse_args(argv)
  with Admin(args.address, args.token) as admin:
    try:
      if args.cmd == "stats":
        print(admin.cache_stats(), end="")
      elif args.cmd == "export":
        tmp = args.file + ".tmp"
        try:
          with open(tmp, "wb") as f:
            n = admin.export_cache(f)
          os.replace(tmp, args.file)
        finally:
          if os.path.exists(tmp):
            os.unlink(tmp)  # a failed export leaves no half-written bundle
        print(f"exported {n} entries to {args.file}")
      elif args.cmd == "import":
        with open(args.file, "rb") as f:
          r = admin.import_cache(f)
        print(f"received {r.received} entries, stored {r.stored} new")
      elif args.cmd == "prewarm":
        print(admin.prewarm(load_manifest(args.manifest), tune=args.tune), end="")
    except grpc.RpcError as e:
      print(f"polygrad.admin {args.cmd}: {e.code().name}: {e.details()}", file=sys.stderr)
      return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
