"""Reference values for frost::autocast (tests/test_autocast.cpp), made with
PyTorch 2.x on the CPU:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 safetensors
    venv/bin/python tests/reference/autocast_reference.py

writes tests/data/autocast_reference.safetensors with, for a two-layer MLP
(Linear(16, 32), GELU, Linear(32, 8)) and cross-entropy on a batch of 8,
run in float32 under torch.autocast("cpu", dtype) for dtype in bfloat16
and float16 (suffix `.bf16` / `.f16`):
- `w1`, `b1`, `w2`, `b2`, `x` (float32), `y` (int64): the model and batch;
- `h.<s>`: the first linear's output (in dtype), `out.<s>` the logits (in
  dtype), `loss.<s>` (float32: cross_entropy is on autocast's float32 list);
- `gw1.<s>`, `gb1.<s>`, `gw2.<s>`, `gb2.<s>`: the float32 weights' gradients;
- `dtypes.<s>` (uint8): the result dtype of each op in OPS under autocast,
  as frost's DType numbers (float32 0, float16 8, bfloat16 9).
"""
import pathlib

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

CODE = {torch.float32: 0, torch.float64: 1, torch.float16: 8, torch.bfloat16: 9}
# The ops frost's test names in this order, each on float32 inputs.
OPS = ["mm", "bmm", "matmul", "addmm", "linear", "conv1d", "conv2d", "conv_transpose2d",
       "scaled_dot_product_attention", "softmax", "log_softmax", "layer_norm", "exp", "sum", "cross_entropy",
       "mse_loss", "relu", "add"]


def op_dtypes(dt):
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    x3, x4 = torch.randn(1, 2, 5), torch.randn(1, 2, 5, 5)
    q = torch.randn(1, 3, 4)
    runs = {
        "mm": lambda: torch.mm(a, b), "bmm": lambda: torch.bmm(a[None], b[None]), "matmul": lambda: a @ b,
        "addmm": lambda: torch.addmm(a, a, b), "linear": lambda: F.linear(a, b, a[0]),
        "conv1d": lambda: F.conv1d(x3, torch.randn(3, 2, 3)),
        "conv2d": lambda: F.conv2d(x4, torch.randn(3, 2, 3, 3)),
        "conv_transpose2d": lambda: F.conv_transpose2d(x4, torch.randn(2, 3, 3, 3)),
        "scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, q, q),
        "softmax": lambda: torch.softmax(a, -1), "log_softmax": lambda: torch.log_softmax(a, -1),
        "layer_norm": lambda: F.layer_norm(a, (4,)), "exp": lambda: a.exp(), "sum": lambda: a.sum(),
        "cross_entropy": lambda: F.cross_entropy(a, torch.tensor([0, 1, 2, 3])),
        "mse_loss": lambda: F.mse_loss(a, b), "relu": lambda: a.relu(), "add": lambda: a + b,
    }
    with torch.autocast("cpu", dtype=dt):
        return torch.tensor([CODE[runs[op]().dtype] for op in OPS], dtype=torch.uint8)


def main():
    g = torch.Generator().manual_seed(11)
    w1, b1 = torch.randn(32, 16, generator=g) * 0.25, torch.randn(32, generator=g) * 0.1
    w2, b2 = torch.randn(8, 32, generator=g) * 0.2, torch.randn(8, generator=g) * 0.1
    x, y = torch.randn(8, 16, generator=g), torch.randint(0, 8, (8,), generator=g)
    out = {"w1": w1, "b1": b1, "w2": w2, "b2": b2, "x": x, "y": y}
    for s, dt in [("bf16", torch.bfloat16), ("f16", torch.float16)]:
        p = [t.clone().requires_grad_() for t in (w1, b1, w2, b2)]
        with torch.autocast("cpu", dtype=dt):
            h = F.linear(x, p[0], p[1])
            logits = F.linear(F.gelu(h), p[2], p[3])
            loss = F.cross_entropy(logits, y)
        loss.backward()
        out[f"h.{s}"], out[f"out.{s}"], out[f"loss.{s}"] = h.detach(), logits.detach(), loss.detach()
        for name, t in zip(["gw1", "gb1", "gw2", "gb2"], p):
            out[f"{name}.{s}"] = t.grad
        out[f"dtypes.{s}"] = op_dtypes(dt)
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "autocast_reference.safetensors"
    save_file({k: v.contiguous() for k, v in out.items()}, str(path))
    print(f"wrote {len(out)} tensors to {path}")


if __name__ == "__main__":
    main()
