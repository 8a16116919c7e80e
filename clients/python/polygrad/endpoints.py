"""Where a session can live: a target (``host:port``, ``unix:/path``, a comma-separated list, a
name with several addresses) resolved to daemons (docs/PROTOCOL.md, "Several daemons"), and a
transport-level probe that names why nothing listens at an address."""
from __future__ import annotations

import ipaddress
import os
import re
import socket
from typing import List, NamedTuple, Optional, Tuple


def probe_address(address: str, timeout: float = 1.0) -> Optional[str]:
  """Why nothing can listen at `address` (no socket file, connection refused, unknown host), or
  None when a plain connect succeeds or the address form is not one this probe knows. Only the
  transport is tried: it names the cause that gRPC's own retrying hides."""
  if address.startswith("unix:"):
    path = address[len("unix:"):]
    path = path[2:] if path.startswith("//") else path
    if not os.path.exists(path):
      return f"no socket file at {path}"
    try:
      with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
    except OSError as e:
      return f"cannot connect to {path}: {e.strerror or e}"
    return None
  target = address.split("///", 1)[1] if "///" in address else address
  host, sep, port = target.rpartition(":")
  if not sep or not port.isdigit():
    return None
  host = host.strip("[]") or "localhost"
  try:
    with socket.create_connection((host, int(port)), timeout=timeout):
      return None
  except socket.timeout:
    return None  # slow, not refused: the connect timeout decides
  except socket.gaierror as e:
    return f"cannot resolve host {host}: {e.strerror or e}"
  except OSError as e:
    return f"cannot connect to {host}:{port}: {e.strerror or e}"


class Endpoint(NamedTuple):
  """One daemon of a target: `address` is what the channel dials; `server_name` is the name TLS
  checks when `address` is an IP taken from a DNS answer (the certificate names the host)."""
  address: str
  server_name: Optional[str] = None


def _split_host_port(item: str) -> Tuple[str, str]:
  if item.startswith("["):
    host, _, rest = item[1:].partition("]")
    return host, rest[1:] if rest.startswith(":") else ""
  host, sep, port = item.rpartition(":")
  return (host, port) if sep and port.isdigit() else (item, "")


def resolve_target(target: str) -> List[Endpoint]:
  """The daemons behind `target`, in a stable order. A Unix socket, a gRPC target of another
  resolver (``xds:``...) and a name with one address are one endpoint (dialled as written);
  ``ipv4:``/``ipv6:`` lists and comma-separated lists give one endpoint per item, and a host name
  (also as ``dns:///name:port``) with several addresses of its preferred family (a headless
  Service) one per address. Names are resolved by the system resolver, also where a ``dns:``
  target names a DNS server."""
  target = original = target.strip()
  if target.startswith(("unix:", "unix-abstract:", "vsock:")):
    return [Endpoint(target)]
  scheme = ""
  m = re.match(r"^(ipv4|ipv6|dns):(?!\d+(,|$))", target)
  if m:
    scheme, target = m.group(1), target[m.end():]
    if scheme == "dns":
      target = target.split("/", 3)[-1] if target.startswith("//") else target
  elif re.match(r"^[a-z][a-z0-9+.-]*:(?!\d+(,|$))", target) and not target.startswith("["):
    return [Endpoint(target)]  # some other resolver's syntax: gRPC's to interpret
  items = [i.strip() for i in target.split(",") if i.strip()]
  out: List[Endpoint] = []
  for item in items:
    host, port = _split_host_port(item)
    if scheme in ("ipv4", "ipv6") or not port:
      out.append(Endpoint(item))
      continue
    try:
      ipaddress.ip_address(host)
      out.append(Endpoint(item))
      continue
    except ValueError:
      pass
    try:
      infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
      infos = []  # let the channel fail with its own message, as a single name does today
    # Only the family the system prefers: "localhost" is ::1 and 127.0.0.1, one daemon, not two.
    family = infos[0][0] if infos else None
    addrs = sorted({i[4][0] for i in infos if i[0] == family})
    if len(addrs) < 2:
      out.append(Endpoint(item))
      continue
    for a in addrs:
      out.append(Endpoint(f"[{a}]:{port}" if ":" in a else f"{a}:{port}", host))
  seen = set()
  out = [e for e in out if not (e.address in seen or seen.add(e.address))]
  # One daemon: dial the target as written, so messages name what the user wrote.
  return [Endpoint(original)] if len(out) == 1 and out[0].server_name is None else out
