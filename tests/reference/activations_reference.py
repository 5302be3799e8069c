# Generates the PyTorch values hard-coded in tests/test_nn_activations.cpp.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/activations_reference.py
# Input: sin(0.7 i + 0.2) * (3 + 0.1 i) for i < 24, shape [2, 3, 4] (spans the
# activations' bends); upstream gradient: cos(0.3 i).
import torch, torch.nn.functional as F
torch.set_default_dtype(torch.float64)

i = torch.arange(24.0)
X = (torch.sin(0.7 * i + 0.2) * (3 + 0.1 * i)).reshape(2, 3, 4)
G = torch.cos(0.3 * i).reshape(2, 3, 4)


def fmt(t):
    return "{" + ", ".join(repr(v) for v in t.detach().reshape(-1).tolist()) + "}"


def run(name, f, *extra):
    xs = [X.clone().requires_grad_()] + [e.clone().requires_grad_() for e in extra]
    y = f(*xs)
    (y * G).sum().backward()
    print('{"%s", %s, %s%s},' % (name, fmt(y), fmt(xs[0].grad), "".join(", " + fmt(e.grad) for e in xs[1:])))


run("softplus", lambda x: F.softplus(x))
run("softplus beta 1.5 threshold 2", lambda x: F.softplus(x, 1.5, 2.0))
run("elu alpha 0.7", lambda x: F.elu(x, 0.7))
run("relu6", lambda x: F.relu6(x))
run("hardtanh -0.5 0.8", lambda x: F.hardtanh(x, -0.5, 0.8))
run("hardsigmoid", lambda x: F.hardsigmoid(x))
run("hardswish", lambda x: F.hardswish(x))
run("mish", lambda x: F.mish(x))
run("selu", lambda x: F.selu(x))
run("logsigmoid", lambda x: F.logsigmoid(x))
run("prelu per channel", lambda x, w: F.prelu(x, w), torch.tensor([0.25, -0.5, 1.5]))
