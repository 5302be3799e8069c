# Generates the PyTorch values hard-coded in tests/test_conv_pool.cpp.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/conv_pool_reference.py
# Inputs are filled with sin(0.37 i + phase) over their flat index i (the test
# builds the same); each case prints the output shape and two checksums:
# sum(y) and sum(y * cos(0.1 k)) over y's flat index k, then the same two
# checksums of the gradient of sum(y * cos(0.1 k)) w.r.t. every input.
import math
import torch
import torch.nn.functional as F

torch.set_printoptions(precision=15)


def filled(shape, phase):
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.float64)
    return torch.sin(0.37 * i + phase).reshape(shape).requires_grad_()


def weights(y):
    k = torch.arange(y.numel(), dtype=torch.float64)
    return torch.cos(0.1 * k).reshape(y.shape)


def report(name, y, inputs):
    w = weights(y)
    loss = (y * w).sum()
    grads = torch.autograd.grad(loss, inputs)
    parts = [f"{v:.15g}" for v in (y.sum().item(), loss.item())]
    for g in grads:
        gw = torch.cos(0.1 * torch.arange(g.numel(), dtype=torch.float64)).reshape(g.shape)
        parts += [f"{g.sum().item():.15g}", f"{(g * gw).sum().item():.15g}"]
    print(f"{name}: {list(y.shape)} " + " ".join(parts))


x = filled((2, 4, 7, 6), 0.1)
w = filled((6, 2, 3, 3), 0.7)
b = filled((6,), 1.3)
report("conv2d_groups_stride_pad_dil", F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2), [x, w, b])

x = filled((2, 3, 6, 7), 0.2)
w = filled((5, 3, 4, 2), 0.4)
report("conv2d_same_even", F.conv2d(x, w, None, padding="same", dilation=(1, 3)), [x, w])

x = filled((3, 5, 9), 0.3)
w = filled((4, 5, 4), 0.9)
b = filled((4,), 0.5)
report("conv1d_same_even", F.conv1d(x, w, b, padding="same", dilation=2), [x, w, b])

x = filled((2, 4, 3, 4), 0.6)
w = filled((4, 3, 3, 2), 0.8)
b = filled((6,), 0.2)
report("conv_transpose2d", F.conv_transpose2d(x, w, b, stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                              groups=2, dilation=(1, 2)), [x, w, b])

x = filled((2, 3, 7, 6), 0.15)
y, idx = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
report("max_pool2d_ceil_pad", y, [x])
print("max_pool2d_ceil_pad indices:", idx.flatten()[:12].tolist(), idx.sum().item())

x = filled((1, 2, 8, 7), 0.25)
y, idx = F.max_pool2d(x, (3, 2), stride=(1, 2), padding=(1, 1), dilation=(2, 1), return_indices=True)
report("max_pool2d_dilation", y, [x])
print("max_pool2d_dilation indices:", idx.flatten()[:12].tolist(), idx.sum().item())

x = filled((2, 3, 7, 6), 0.35)
report("avg_pool2d_ceil_nopadcount", F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), [x])
report("avg_pool2d_ceil_padcount", F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=True), [x])
report("avg_pool2d_divisor", F.avg_pool2d(x, (2, 3), stride=(1, 2), padding=(1, 1), divisor_override=5), [x])

x = filled((2, 3, 7, 5), 0.45)
report("adaptive_avg_pool2d", F.adaptive_avg_pool2d(x, (3, 2)), [x])
report("adaptive_avg_pool2d_up", F.adaptive_avg_pool2d(x, (9, 4)), [x])
