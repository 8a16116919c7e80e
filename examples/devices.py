"""The Devices example of the polygrad Python README (seed 001), verbatim.

From the repository root: PYTHONPATH=clients/python python3 examples/devices.py
Device.cuda_available() asks the daemon (GetInfo's device list); today's polygradd executes on
its CPU, so this prints CPU.
"""
from polygrad import Device, Tensor

x = Tensor.rand(4)

if Device.cuda_available():
    y = (x * 2).to('cuda')
    print(y.device)      # CUDA
    print(y.numpy())     # executes on CUDA, returns host numpy array
else:
    y = (x * 2).to('cpu')
    print(y.device)      # CPU
