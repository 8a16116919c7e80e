"""Devices as the daemon reports them (GetInfo's device list).

Tensors live on the daemon's CPU unless moved with Tensor.to('cuda') (or made with
device='cuda'), which the daemon runs as an explicit copy. Asking for a device checks the daemon's
list and raises PolygradDeviceError quoting the daemon's reason (Device.detail) when it lacks the
device or lists it as unavailable.
"""
from __future__ import annotations

import re
from typing import List, NamedTuple, Optional

from .connection import get_connection
from .errors import PolygradError

_NAME = re.compile(r"^([A-Za-z]+)(?::(\d+))?$")


class PolygradDeviceError(PolygradError):
  """The daemon has no such device, or lists it as unavailable (the message quotes its reason)."""


class DeviceInfo(NamedTuple):
  name: str
  available: bool
  detail: str


def canonicalize(device: str) -> str:
  """'cpu' -> 'CPU', 'cuda:0' -> 'CUDA:0'. Raises TypeError/ValueError for a malformed name
  (before any round trip)."""
  if not isinstance(device, str):
    raise TypeError(f"a device name is a str such as 'CPU' or 'CUDA', got {type(device).__name__}")
  m = _NAME.match(device.strip())
  if m is None:
    raise ValueError(f"malformed device name {device!r} (expected e.g. 'CPU', 'CUDA' or 'CUDA:0')")
  base = m.group(1).upper()
  return base if m.group(2) is None else f"{base}:{int(m.group(2))}"


class _DeviceNames(type):
  def __getitem__(cls, device: str) -> str:
    """Device['cpu'] is 'CPU' (the seed polygrad API): a device's canonical name."""
    return canonicalize(device)


class Device(metaclass=_DeviceNames):
  """tinygrad's Device: DEFAULT names where tensors made from data are placed (set it to 'CUDA'
  to place new tensors there); the daemon decides what exists. Device['cuda:0'] is 'CUDA:0'."""

  DEFAULT = "CPU"

  @staticmethod
  def canonicalize(device: Optional[str]) -> str:
    return Device.DEFAULT if device is None else canonicalize(device)

  @staticmethod
  def list() -> List[DeviceInfo]:
    """The daemon's devices, from the GetInfo answer cached when the connection was made."""
    return [DeviceInfo(d.name, bool(d.available), d.detail) for d in get_connection().info.devices]

  @staticmethod
  def find(device: str) -> Optional[DeviceInfo]:
    """The daemon's entry for `device` ('CUDA:0' also matches a daemon entry named 'CUDA')."""
    name = canonicalize(device)
    base = name.split(":")[0]
    devices = Device.list()
    for d in devices:
      if canonicalize(d.name) == name:
        return d
    for d in devices:
      if canonicalize(d.name) == base and name in (base, f"{base}:0"):
        return d
    return None

  @staticmethod
  def cuda_available() -> bool:
    """Whether the daemon lists a CUDA device as available."""
    return any(d.available and canonicalize(d.name).split(":")[0] == "CUDA" for d in Device.list())

  @staticmethod
  def require(device: Optional[str]) -> str:
    """The canonical name of `device` if tensors can live there, else PolygradDeviceError.
    The CPU needs no round trip: tensors are always there."""
    name = Device.canonicalize(device)
    if name in ("CPU", "CPU:0"):
      return "CPU"
    conn = get_connection()
    info = Device.find(name)
    if info is None:
      have = ", ".join(d.name for d in Device.list()) or "none"
      raise PolygradDeviceError(f"polygradd at {conn.address} has no device {name} (it has: {have})")
    if not info.available:
      raise PolygradDeviceError(f"device {name} is not available on polygradd at {conn.address}: "
                                f"{info.detail or 'no reason given'}")
    # tinygrad's spelling: the first device of a kind is just the kind ("CUDA").
    base, _, index = name.partition(":")
    return base if index in ("", "0") else name
