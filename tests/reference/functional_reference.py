# Generates the PyTorch values hard-coded in tests/test_nn_functional.cpp.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/functional_reference.py
# Inputs are closed-form (sin/cos of arange) so the C++ test rebuilds them exactly.
import torch, torch.nn.functional as F
torch.set_default_dtype(torch.float64)


def wave(n, a, b, scale, shift):  # sin(a i + b) * (1 + scale i) + shift
    i = torch.arange(n, dtype=torch.float64)
    return torch.sin(a * i + b) * (1 + scale * i) + shift


def weights(n):  # upstream gradient: d(sum(y * cos(0.3 i)))/dy
    return torch.cos(0.3 * torch.arange(n, dtype=torch.float64))


def show(name, t):
    print(f"  // {name}")
    print("  {" + ", ".join(repr(v) for v in t.detach().reshape(-1).tolist()) + "}")


def run(name, f, *inputs):
    xs = [t.clone().requires_grad_() for t in inputs]
    y = f(*xs)
    (y * weights(y.numel()).reshape(y.shape)).sum().backward()
    print(name)
    show("y", y)
    for k, x in enumerate(xs):
        show(f"grad {k}", x.grad)


x = wave(36, 0.37, 0.1, 0.05, 0.5).reshape(3, 2, 2, 3)
w, b = torch.tensor([1.5, -0.5]), torch.tensor([0.1, 0.2])
rm, rv = torch.tensor([0.2, -0.1]), torch.tensor([1.5, 0.8])
run("batch_norm training", lambda x, w, b: F.batch_norm(x, rm, rv, w, b, True, 0.2, 1e-5), x, w, b)
print("after one step: running_mean", rm.tolist(), "running_var", rv.tolist())
run("batch_norm eval (updated stats, eps 1e-3)", lambda x, w, b: F.batch_norm(x, rm, rv, w, b, False, 0.2, 1e-3), x, w, b)

x = wave(24, 0.61, -0.4, 0.02, 0.0).reshape(2, 3, 4)
w, b = 1 + 0.1 * torch.sin(torch.arange(12.0)).reshape(3, 4), 0.05 * torch.arange(12.0).reshape(3, 4)
run("layer_norm", lambda x, w, b: F.layer_norm(x, [3, 4], w, b, 1e-5), x, w, b)

x = wave(48, 0.23, 0.7, 0.03, -0.2).reshape(2, 6, 2, 2)
w, b = torch.tensor([1.0, 0.5, -1.0, 2.0, 0.7, 1.2]), torch.tensor([0.0, 0.1, 0.2, -0.3, 0.4, 0.5])
run("group_norm", lambda x, w, b: F.group_norm(x, 3, w, b, 1e-5), x, w, b)

wt = wave(15, 0.5, 0.0, 0.0, 0.0).reshape(5, 3)
idx = torch.tensor([[0, 2, 4], [2, 1, 0]])
run("embedding padding_idx=2", lambda w: F.embedding(idx, w, padding_idx=2), wt)
