"""PyTorch's side of bench_eager_vs_frozen's quantize_linear table: the
guide's MLP and ResearchModel in evaluation mode, float against
torch.ao.quantization.quantize_dynamic({nn.Linear}, qint8), both traced
(torch.jit.trace + freeze), two threads, batch 1 and 64.

    /usr/bin/python3 benchmarks/reference/torch_quantized.py

Prints milliseconds per call (median of 7 runs of `reps` calls) and the
largest difference of the quantized output relative to the float output's
largest magnitude.
"""
import time

import torch
import torch.nn as nn

from torch_layers import ResearchModel  # the guide's model, as bench_layers' reference has it

torch.set_num_threads(2)
torch.manual_seed(0)


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def ms_per_call(f, x, reps):
    with torch.inference_mode():
        for _ in range(3):
            f(x)
        runs = []
        for _ in range(7):
            t = time.perf_counter()
            for _ in range(reps):
                f(x)
            runs.append((time.perf_counter() - t) / reps * 1e3)
    return sorted(runs)[3]


def frozen(model, x):
    with torch.inference_mode():
        return torch.jit.freeze(torch.jit.trace(model, x))


print(f"torch {torch.__version__}, engine {torch.backends.quantized.engine}, 2 threads")
print(f"{'model':<16} {'batch':>5} {'float ms':>11} {'int8 ms':>11} {'speedup':>8} {'max rel diff':>13}")
for name, make, shape in [("ResearchModel", ResearchModel, (3, 32, 32)), ("MLP", mlp, (784,))]:
    for batch in (1, 64):
        model = make().eval()
        x = torch.randn(batch, *shape)
        q = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        f, fq = frozen(model, x), frozen(q, x)
        reps = 2000 if name == "MLP" and batch == 1 else 200 if batch == 1 else 20
        tf, tq = ms_per_call(f, x, reps), ms_per_call(fq, x, reps)
        with torch.inference_mode():
            y, yq = f(x), fq(x)
        diff = ((yq - y).abs().max() / y.abs().max()).item()
        print(f"{name:<16} {batch:>5} {tf:>11.4f} {tq:>11.4f} {tf / tq:>7.2f}x {diff:>13.2e}")
