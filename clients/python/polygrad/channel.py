"""gRPC channels to a daemon: TLS when POLYGRAD_TLS_CA is set (TCP only; POLYGRAD_TLS_CERT and
POLYGRAD_TLS_KEY add a client certificate, POLYGRAD_TLS_SERVER_NAME overrides the checked name),
and the bearer token on every call (docs/OPERATIONS.md)."""
from __future__ import annotations

import os
from typing import Optional

import grpc

from .errors import PolygradConnectionError

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class _TokenInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                        grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
  """Adds the bearer token to every call (call credentials need TLS; the Unix socket has none)."""

  def __init__(self, token: str):
    self._md = ("authorization", f"Bearer {token}")

  def _details(self, d):
    return d._replace(metadata=list(d.metadata or ()) + [self._md])

  def intercept_unary_unary(self, continuation, d, request):
    return continuation(self._details(d), request)

  def intercept_unary_stream(self, continuation, d, request):
    return continuation(self._details(d), request)

  def intercept_stream_unary(self, continuation, d, request_iterator):
    return continuation(self._details(d), request_iterator)

  def intercept_stream_stream(self, continuation, d, request_iterator):
    return continuation(self._details(d), request_iterator)


def _read_env_file(name: str) -> Optional[bytes]:
  path = os.environ.get(name)
  if not path:
    return None
  try:
    with open(path, "rb") as f:
      return f.read()
  except OSError as e:
    raise PolygradConnectionError(f"cannot read {name}={path}: {e}") from e


def make_channel(address: str, token: Optional[str] = None, server_name: Optional[str] = None) -> grpc.Channel:
  """A channel to `address`: TLS when POLYGRAD_TLS_CA is set (TCP only), the token on every call.
  `server_name` is the name to check in the certificate when `address` is an IP the client
  resolved itself (POLYGRAD_TLS_SERVER_NAME still wins)."""
  options = list(_CHANNEL_OPTIONS)
  ca = None if address.startswith("unix:") else _read_env_file("POLYGRAD_TLS_CA")
  if ca is not None:
    creds = grpc.ssl_channel_credentials(root_certificates=ca,
                                         private_key=_read_env_file("POLYGRAD_TLS_KEY"),
                                         certificate_chain=_read_env_file("POLYGRAD_TLS_CERT"))
    name = os.environ.get("POLYGRAD_TLS_SERVER_NAME") or server_name
    if name:
      options.append(("grpc.ssl_target_name_override", name))
    channel = grpc.secure_channel(address, creds, options=options)
  else:
    channel = grpc.insecure_channel(address, options=options)
  return grpc.intercept_channel(channel, _TokenInterceptor(token)) if token else channel
