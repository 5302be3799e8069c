"""torch.mm GFLOP/s on two threads, the reference for bench_op_overhead's
matmul/512 and matmul/1024 (run both on the same machine, one after the
other). Needs Debian's python3-torch: /usr/bin/python3 torch_mm.py"""
import time

import torch

torch.set_num_threads(2)
for n in (512, 1024):
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        torch.mm(a, b)
    iters = 100 if n == 512 else 20
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(iters):
            torch.mm(a, b)
        best = max(best, 2 * n**3 * iters / (time.perf_counter() - t) / 1e9)
    print(f"torch.mm/{n}: {best:.1f} GFLOP/s")
