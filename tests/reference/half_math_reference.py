"""Reference values for frost's float16 and bfloat16 math and autograd
(tests/test_half_math.cpp), made with PyTorch 2.x on the CPU:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 safetensors
    venv/bin/python tests/reference/half_math_reference.py

writes tests/data/half_math_reference.safetensors with, for d in float16
and bfloat16 (every tensor in dtype d unless said):
- `x.<d>`, `y.<d>` [8, 16]: the inputs (y has no zeros), `w.<d>` [16, 8];
- `<op>.<d>` for the elementwise ops of OPS (unary ops of x, binary ops of
  x and y, the scalar ops with PyTorch's Python-float scalars);
- `softmax.<d>`, `log_softmax.<d>` (dim -1), `sum.<d>`, `sum1.<d>` (dim 1),
  `mean.<d>`, `amax1.<d>`, `matmul.<d>` (x @ w), `layer_norm.<d>` (over 16,
  no affine), `conv2d.<d>` (x as [2, 4, 4, 4] with `k.<d>` [3, 4, 3, 3],
  padding 1);
- gradients of loss = (softmax(x @ w) * t).sum() + (gelu(x) * y).mean():
  `gx.<d>`, `gw.<d>` (`t.<d>` [8, 8] is the weighting).
"""
import pathlib

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

UNARY = {
    "neg": lambda x: -x, "abs": torch.abs, "exp": torch.exp, "log": lambda x: torch.log(x.abs() + 0.5),
    "sqrt": lambda x: torch.sqrt(x.abs()), "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.25), "sin": torch.sin,
    "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "erf": torch.erf,
    "softplus": F.softplus, "elu": F.elu, "leaky_relu": lambda x: F.leaky_relu(x, 0.1),
    "floor": torch.floor, "round": torch.round, "clamp": lambda x: torch.clamp(x, -0.3, 0.7),
    "pow2": lambda x: torch.pow(x, 2.0), "pow_half": lambda x: torch.pow(x.abs(), 0.5),
    "add_s": lambda x: x + 0.1, "mul_s": lambda x: x * 0.1, "rsub_s": lambda x: 0.3 - x,
    "div_s": lambda x: x / 3.0, "rdiv_s": lambda x: 1.0 / (x.abs() + 0.5),
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
}


def main():
    out = {}
    for name, dt in [("float16", torch.float16), ("bfloat16", torch.bfloat16)]:
        g = torch.Generator().manual_seed(7)
        x = (torch.randn(8, 16, generator=g) * 1.5).to(dt)
        y = torch.randn(8, 16, generator=g).to(dt)
        y = torch.where(y == 0, torch.ones_like(y), y)
        w = (torch.randn(16, 8, generator=g) * 0.3).to(dt)
        t = torch.randn(8, 8, generator=g).to(dt)
        k = (torch.randn(3, 4, 3, 3, generator=g) * 0.3).to(dt)
        out.update({f"x.{name}": x, f"y.{name}": y, f"w.{name}": w, f"t.{name}": t, f"k.{name}": k})
        for op, f in UNARY.items():
            out[f"{op}.{name}"] = f(x)
        for op, f in BINARY.items():
            out[f"{op}.{name}"] = f(x, y)
        out[f"softmax.{name}"] = torch.softmax(x, -1)
        out[f"log_softmax.{name}"] = torch.log_softmax(x, -1)
        out[f"sum.{name}"] = x.sum()
        out[f"sum1.{name}"] = x.sum(1)
        out[f"mean.{name}"] = x.mean()
        out[f"amax1.{name}"] = x.amax(1)
        out[f"matmul.{name}"] = x @ w
        out[f"layer_norm.{name}"] = F.layer_norm(x, (16,))
        out[f"conv2d.{name}"] = F.conv2d(x.reshape(2, 4, 4, 4), k, padding=1)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        loss = (torch.softmax(xg @ wg, -1) * t).sum() + (F.gelu(xg) * y).mean()
        loss.backward()
        out[f"gx.{name}"], out[f"gw.{name}"] = xg.grad, wg.grad
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "half_math_reference.safetensors"
    save_file({k: v.contiguous() for k, v in out.items()}, str(path))
    print(f"wrote {len(out)} tensors to {path}")


if __name__ == "__main__":
    main()
