# Generates the PyTorch values hard-coded in tests/test_nn_losses.cpp.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/losses_reference.py
import torch, torch.nn.functional as F
torch.set_printoptions(precision=12)
x = torch.tensor([[0.2, -1.0, 0.5, 1.5], [1.0, 0.3, -0.7, 0.1], [-0.4, 0.9, 0.0, 0.6]], dtype=torch.float64)
t = torch.tensor([3, -100, 1])
w = torch.tensor([0.5, 2.0, 1.0, 1.5], dtype=torch.float64)
for red in ["mean", "sum", "none"]:
    print(red, F.cross_entropy(x, t, weight=w, ignore_index=-100, label_smoothing=0.2, reduction=red).tolist())
print("plain", F.cross_entropy(x, torch.tensor([3, 0, 1])).item())
print("ls_noweight", F.cross_entropy(x, torch.tensor([3, 0, 1]), label_smoothing=0.1).item())
p = torch.softmax(torch.tensor([[0.1, 0.2, 0.3, 0.4], [1, 0, 0, 0], [0.5, 0.5, 0, 0]], dtype=torch.float64), 1)
print("probs", F.cross_entropy(x, p, label_smoothing=0.1).item())
y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.25]], dtype=torch.float64)
z = torch.tensor([[0.3, -2.0], [4.0, 0.7], [-0.2, 1.3]], dtype=torch.float64)
print("bcel", F.binary_cross_entropy_with_logits(z, y, pos_weight=torch.tensor([2.0, 0.5], dtype=torch.float64)).item())
print("bce", F.binary_cross_entropy(torch.sigmoid(z), y).item())
print("sl1", F.smooth_l1_loss(z, y, beta=0.5).item())
print("huber", F.huber_loss(z, y, delta=0.7).item(), F.huber_loss(z, y, reduction="none", delta=2.0).flatten().tolist())
lp = torch.log_softmax(z, 1)
q = torch.tensor([[0.25, 0.75], [0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
for red in ["batchmean", "mean", "sum"]:
    print("kl", red, F.kl_div(lp, q, reduction=red).item())
print("kl none", F.kl_div(lp, q, reduction="none").flatten().tolist())
print("kl log_target", F.kl_div(lp, torch.log_softmax(y, 1), reduction="batchmean", log_target=True).item())
zz = lp.clone().requires_grad_()
F.kl_div(zz, q, reduction="batchmean").backward()
print("kl grad", zz.grad.flatten().tolist())
# K-dimensional cross_entropy (N, C, d): positions as rows
xk = torch.tensor([0.2, -1.0, 0.5, 1.5, 1.0, 0.3, -0.7, 0.1, -0.4, 0.9, 0.0, 0.6,
                   0.8, -0.3, 0.4, -1.2, 0.7, 0.05, 0.3, -0.6, 1.1, -0.2, 0.9, 0.25], dtype=torch.float64).reshape(2, 4, 3)
tk = torch.tensor([[3, 0, 1], [2, -100, 0]])
print("ce kdim", F.cross_entropy(xk, tk).item(), F.cross_entropy(xk, tk, reduction="none").flatten().tolist())
# edge points: saturated probabilities, zero logits
pp = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64, requires_grad=True)
F.binary_cross_entropy(pp, torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64), reduction="sum").backward()
print("bce edge grad", pp.grad.tolist())
xx = torch.zeros(3, dtype=torch.float64, requires_grad=True)
F.binary_cross_entropy_with_logits(xx, torch.tensor([0, 1, 0.3], dtype=torch.float64), reduction="sum").backward()
print("bcel zero grad", xx.grad.tolist())
