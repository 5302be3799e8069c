"""PyTorch's first and second derivatives at the kinks of piecewise ops
(tests/test_kinks.cpp), made with PyTorch 2.x on the CPU in float64:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 safetensors
    venv/bin/python tests/reference/kinks_reference.py

writes tests/data/kinks_reference.safetensors with, for each elementwise
case c: `c.x` (the points: the kinks and a point on each side), `c.g`
(dy/dx) and `c.h` (d2y/dx2: the gradient of sum(dy/dx), 0 where PyTorch's
gradient has no graph or no derivative of its own); for prod: `prod<i>.x`, `.g` and the Hessian `.h` (`prod_dim`: over dim 1 of a [2, 3]);
for prelu: `prelu.x`, `prelu.w`, `.gx`, `.gw` and `.gxw` (d/dw of sum(dy/dx)).
"""
import pathlib

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

f64 = torch.float64
Z = torch.zeros((), dtype=f64)

CASES = {
    "clamp": (lambda x: torch.clamp(x, -1.0, 1.0), [-1.5, -1.0, 0.3, 1.0, 1.5]),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 1.0), [-1.0, -0.5, 0.2, 1.0, 1.5]),
    "relu6": (lambda x: F.relu6(x), [-1.0, 0.0, 3.0, 6.0, 7.0]),
    "elu": (lambda x: F.elu(x, 1.0), [-0.5, 0.0, 0.5]),
    "elu_alpha2": (lambda x: F.elu(x, 2.0), [-0.5, 0.0, 0.5]),
    "selu": (lambda x: F.selu(x), [-0.5, 0.0, 0.5]),
    "softplus_t1": (lambda x: F.softplus(x, 1.0, 1.0), [0.5, 1.0, 1.5]),
    "softplus_b2_t1": (lambda x: F.softplus(x, 2.0, 1.0), [0.25, 0.5, 0.75]),
    "smooth_l1": (lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), reduction="sum"), [-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0]),
    "smooth_l1_beta05": (lambda x: F.smooth_l1_loss(x, torch.zeros_like(x), reduction="sum", beta=0.5),
                         [-0.5, 0.0, 0.25, 0.5, 1.0]),
    "huber": (lambda x: F.huber_loss(x, torch.zeros_like(x), reduction="sum"), [-2.0, -1.0, 0.0, 0.5, 1.0]),
    "huber_delta2": (lambda x: F.huber_loss(x, torch.zeros_like(x), reduction="sum", delta=2.0), [-2.0, 0.0, 1.0, 2.0]),
    "l1": (lambda x: F.l1_loss(x, torch.zeros_like(x), reduction="sum"), [-1.0, 0.0, 1.0]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), [-1.0, 0.0, 1.0]),
    "relu": (lambda x: F.relu(x), [-1.0, 0.0, 1.0]),
    "abs": (lambda x: torch.abs(x), [-1.0, 0.0, 1.0]),
    "hardsigmoid": (lambda x: F.hardsigmoid(x), [-3.5, -3.0, 0.0, 3.0, 3.5]),
    "hardswish": (lambda x: F.hardswish(x), [-3.5, -3.0, 0.0, 3.0, 3.5]),
    # ties, zeros and edges of the other piecewise ops and reductions
    "maximum_ties": (lambda x: torch.maximum(x, torch.tensor([0.0, 1.0, 2.0], dtype=f64)), [0.0, 1.0, 3.0]),
    "minimum_ties": (lambda x: torch.minimum(x, torch.tensor([0.0, 1.0, 2.0], dtype=f64)), [0.0, 1.0, 3.0]),
    "max_ties": (lambda x: x.max(), [1.0, 3.0, 3.0, 2.0]),
    "min_ties": (lambda x: x.min(), [2.0, 1.0, 1.0, 3.0]),
    "max_dim_ties": (lambda x: x.reshape(2, 3).max(dim=1).values, [1.0, 3.0, 3.0, 2.0, 2.0, 0.0]),
    "min_dim_ties": (lambda x: x.reshape(2, 3).min(dim=1).values, [1.0, 0.0, 0.0, 2.0, 2.0, 5.0]),
    "norm2_zero": (lambda x: torch.linalg.vector_norm(x), [0.0, 0.0, 0.0]),
    "norm1": (lambda x: torch.linalg.vector_norm(x, 1), [0.0, -1.0, 2.0]),
    "norm3_zero_entry": (lambda x: torch.linalg.vector_norm(x, 3), [0.0, 1.0, -2.0]),
    "norm_inf_ties": (lambda x: torch.linalg.vector_norm(x, float("inf")), [-3.0, 1.0, 3.0]),
    "std_constant": (lambda x: x.std(), [2.0, 2.0, 2.0]),
    "max_pool_ties": (lambda x: F.max_pool2d(x.reshape(1, 1, 2, 2), 2), [1.0, 1.0, 1.0, 1.0]),
    "max_pool_overlap": (lambda x: F.max_pool2d(x.reshape(1, 1, 3, 3), 2, stride=1),
                         [1.0, 2.0, 2.0, 2.0, 2.0, 1.0, 0.0, 2.0, 2.0]),
    "pow0": (lambda x: torch.pow(x, 0.0), [0.0, 2.0]),
    "rpow_base0": (lambda x: torch.pow(0.0, x), [0.0, 1.0, 2.0]),
    "bce_edges": (lambda x: F.binary_cross_entropy(x, torch.full_like(x, 0.25), reduction="sum"), [0.0, 0.5, 1.0]),
    "round_halves": (lambda x: torch.round(x), [0.5, 1.5, 2.5]),
    "sign": (lambda x: torch.sign(x), [-1.0, 0.0, 1.0]),
    "softplus_t20": (lambda x: F.softplus(x), [19.0, 20.0, 21.0]),
}

PRODS = [[0.0, -2.0, 0.0], [0.0, -2.0, 3.0], [0.0, 0.0, 0.0], [1.5, -2.0, 3.0], [0.0, 2.0, 0.0, 0.5]]


def derivatives(f, pts):
    x = torch.tensor(pts, dtype=f64, requires_grad=True)
    (g,) = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    if g.requires_grad:
        try:
            (h,) = torch.autograd.grad(g.sum(), x, allow_unused=True)
            h = torch.zeros_like(x) if h is None else h
        except RuntimeError:  # hardsigmoid_backward has no derivative: piecewise linear, so 0
            h = torch.zeros_like(x)
    else:
        h = torch.zeros_like(x)
    return x.detach(), g.detach(), h.detach()


def main():
    out = {}
    for name, (f, pts) in CASES.items():
        out[f"{name}.x"], out[f"{name}.g"], out[f"{name}.h"] = derivatives(f, pts)
    # prod over a dim: one slice with two zeros, one with one
    x = torch.tensor([0.0, 2.0, 0.0, 1.0, 0.0, 3.0], dtype=f64)
    out["prod_dim.x"] = x
    out["prod_dim.g"] = torch.autograd.functional.jacobian(lambda v: v.reshape(2, 3).prod(dim=1).sum(), x)
    out["prod_dim.h"] = torch.autograd.functional.hessian(lambda v: v.reshape(2, 3).prod(dim=1).sum(), x)
    for i, pts in enumerate(PRODS):
        x = torch.tensor(pts, dtype=f64, requires_grad=True)
        (g,) = torch.autograd.grad(x.prod(), x)
        out[f"prod{i}.x"], out[f"prod{i}.g"] = x.detach(), g
        out[f"prod{i}.h"] = torch.autograd.functional.hessian(lambda v: v.prod(), x.detach())
    x = torch.tensor([0.0, -1.0, 2.0], dtype=f64, requires_grad=True)
    w = torch.tensor([0.25], dtype=f64, requires_grad=True)
    gx, gw = torch.autograd.grad(F.prelu(x, w).sum(), (x, w), create_graph=True)
    (gxw,) = torch.autograd.grad(gx.sum(), w)
    out["prelu.x"], out["prelu.w"] = x.detach(), w.detach()
    out["prelu.gx"], out["prelu.gw"], out["prelu.gxw"] = gx.detach(), gw.detach(), gxw
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "kinks_reference.safetensors"
    save_file({k: v.detach().clone().contiguous() for k, v in out.items()}, str(path))
    print(f"wrote {len(out)} tensors to {path} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
