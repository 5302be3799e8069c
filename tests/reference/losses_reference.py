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
