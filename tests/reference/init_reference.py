# Generates the PyTorch values hard-coded in tests/test_init.cpp: gains, fans
# and the moments of the truncated normals the statistics tests compare with.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/init_reference.py
import math
import torch
import torch.nn.init as init

for nl, p in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
              ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 0), ("selu", None)]:
    print("gain", nl, p, repr(init.calculate_gain(nl, p)))
for shape in [(3, 4), (8, 4, 3, 3), (5, 2, 7)]:
    print("fans", shape, init._calculate_fan_in_and_fan_out(torch.empty(shape)))
for msg_case in [lambda: init.calculate_gain("foo"), lambda: init._calculate_fan_in_and_fan_out(torch.empty(3)),
                 lambda: init.orthogonal_(torch.empty(3)), lambda: init.eye_(torch.empty(2, 2, 2))]:
    try:
        msg_case()
    except ValueError as e:
        print("error", e)

# Mean and standard deviation of N(mean, std^2) truncated to [a, b].
def trunc_moments(mean, std, a, b):
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2
    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    m = mean + std * (pdf(al) - pdf(be)) / z
    v = std * std * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    return m, math.sqrt(v)
print("trunc default", trunc_moments(0.0, 1.0, -2.0, 2.0))
print("trunc shifted", trunc_moments(1.0, 2.0, 0.0, 3.0))
# Cross-check the formula against PyTorch's own sampler.
torch.manual_seed(0)
t = init.trunc_normal_(torch.empty(2000000, dtype=torch.float64), 1.0, 2.0, 0.0, 3.0)
print("torch trunc shifted sample", t.mean().item(), t.std().item(), t.min().item(), t.max().item())
