"""PyTorch's side of bench_layers: the same rows, same shapes, two threads.

    /usr/bin/python3 benchmarks/reference/torch_layers.py

Prints milliseconds per iteration (median of 5 runs of `reps` iterations).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
torch.manual_seed(0)


class ResearchModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Linear(128 * 8 * 8, 512), nn.ReLU(), nn.Linear(512, 10))
        self.aux_classifier = nn.Linear(128 * 8 * 8, 10)

    def forward(self, x):
        x = self.features(x).flatten(1)
        if self.training and torch.rand(1).item() < 0.3:
            return self.aux_classifier(x)
        return self.classifier(x)


def timed(name, fn, reps=10):
    fn()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        runs.append((time.perf_counter() - t0) / reps * 1e3)
    runs.sort()
    print(f"{name:32s} {runs[2]:8.2f} ms")


def conv_rows(cin, cout, hw):
    conv = nn.Conv2d(cin, cout, 3, padding=1)
    x = torch.randn(64, cin, hw, hw)
    with torch.inference_mode():
        timed(f"conv2d/{cin}x{cout}/bs64", lambda: conv(x))
    xg = x.clone().requires_grad_()

    def fwd_bwd():
        conv.zero_grad()
        xg.grad = None
        conv(xg).sum().backward()
    timed(f"conv2d/{cin}x{cout}/bs64/fwd_bwd", fwd_bwd)


def main():
    conv_rows(3, 64, 32)
    conv_rows(64, 128, 16)
    bn = nn.BatchNorm2d(64)
    x = torch.randn(64, 64, 32, 32)
    with torch.no_grad():
        timed("batchnorm2d/bs64", lambda: bn(x))
    with torch.inference_mode():
        timed("maxpool2d/bs64", lambda: F.max_pool2d(x, 2))
    model = ResearchModel()
    xi = torch.randn(64, 3, 32, 32)
    model.eval()
    with torch.inference_mode():
        timed("research/infer_bs64", lambda: model(xi))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    y = torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(xi), y).backward()
        opt.step()
    timed("research/train_step_bs64", step)


if __name__ == "__main__":
    main()
