# Generates the PyTorch values hard-coded in tests/test_optim.cpp.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/optim_reference.py
import math
import torch

torch.set_default_dtype(torch.float64)


def fmt(t):
    return "{" + ", ".join(repr(float(v)) for v in torch.as_tensor(t).flatten().tolist()) + "}"


# The fixed problem: loss = mean((x W + b - y)^2) + 0.1 sum(W^4), 5 steps.
X = torch.tensor([[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0], [1.0, 1.0]])
Y = torch.tensor([[1.0, 0.0, -1.0], [0.5, 2.0, 0.0], [-1.0, 1.0, 1.5], [0.0, -0.5, 2.0]])
W0 = torch.tensor([[0.3, -0.2, 0.1], [0.4, 0.6, -0.5]])
B0 = torch.tensor([0.05, -0.1, 0.2])


def loss_fn(W, b):
    return ((X @ W + b - Y) ** 2).mean() + 0.1 * (W ** 4).sum()


def run(make, steps=5):
    W = W0.clone().requires_grad_()
    b = B0.clone().requires_grad_()
    opt = make(W, b)
    for _ in range(steps):
        opt.zero_grad()
        loss_fn(W, b).backward()
        opt.step()
    return W.detach(), b.detach()


O = torch.optim
cases = [
    ("sgd_plain", lambda W, b: O.SGD([W, b], lr=0.1)),
    ("sgd_momentum", lambda W, b: O.SGD([W, b], lr=0.1, momentum=0.9)),
    ("sgd_dampening_wd", lambda W, b: O.SGD([W, b], lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.01)),
    ("sgd_nesterov_wd", lambda W, b: O.SGD([W, b], lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("sgd_maximize", lambda W, b: O.SGD([W, b], lr=0.01, momentum=0.5, maximize=True)),
    ("sgd_groups", lambda W, b: O.SGD([{"params": [W], "lr": 0.1, "momentum": 0.9},
                                       {"params": [b], "lr": 0.01, "weight_decay": 1e-4}], lr=0.5)),
    ("adam_default", lambda W, b: O.Adam([W, b])),
    ("adam_betas_wd", lambda W, b: O.Adam([W, b], lr=0.05, betas=(0.8, 0.9), weight_decay=0.1)),
    ("adam_amsgrad", lambda W, b: O.Adam([W, b], lr=0.05, amsgrad=True)),
    ("adam_maximize", lambda W, b: O.Adam([W, b], lr=0.01, maximize=True, eps=1e-3)),
    ("adamw_default", lambda W, b: O.AdamW([W, b], lr=0.05)),
    ("adamw_wd_amsgrad", lambda W, b: O.AdamW([W, b], lr=0.05, weight_decay=0.5, amsgrad=True, betas=(0.5, 0.7))),
    ("rmsprop_default", lambda W, b: O.RMSprop([W, b])),
    ("rmsprop_centered_momentum_wd", lambda W, b: O.RMSprop([W, b], lr=0.01, centered=True, momentum=0.9,
                                                           weight_decay=0.1)),
    ("rmsprop_alpha_momentum_maximize", lambda W, b: O.RMSprop([W, b], lr=0.005, alpha=0.9, momentum=0.5,
                                                              eps=1e-4, maximize=True)),
]
print("// optimizer trajectories: name, W after 5 steps, b after 5 steps")
for name, make in cases:
    W, b = run(make)
    print('{"%s", %s, %s},' % (name, fmt(W), fmt(b)))

# Long run for the state_dict round trip is checked in C++ only (self-consistency).


def sched_run(make_opt, make_sched, steps):
    W = W0.clone().requires_grad_()
    b = B0.clone().requires_grad_()
    opt = make_opt(W, b)
    sched = make_sched(opt)
    lrs, moms = [sched.get_last_lr()], []

    def mom(g):
        return g["betas"][0] if "betas" in g else g["momentum"]
    moms.append([mom(g) for g in opt.param_groups])
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        moms.append([mom(g) for g in opt.param_groups])
    return lrs, moms


def two_groups_sgd(W, b):
    return O.SGD([{"params": [W], "lr": 0.1}, {"params": [b], "lr": 0.05}], lr=0.1, momentum=0.9)


scheds = [
    ("step_lr", two_groups_sgd, lambda o: O.lr_scheduler.StepLR(o, 3, 0.5), 10),
    ("cosine", two_groups_sgd, lambda o: O.lr_scheduler.CosineAnnealingLR(o, 4, 0.001), 13),
    ("onecycle_cos_sgd", two_groups_sgd, lambda o: O.lr_scheduler.OneCycleLR(o, 0.1, total_steps=10), 10),
    ("onecycle_linear_3phase_sgd", two_groups_sgd,
     lambda o: O.lr_scheduler.OneCycleLR(o, [0.2, 0.1], total_steps=12, pct_start=0.25, anneal_strategy="linear",
                                         three_phase=True, div_factor=10, final_div_factor=100), 12),
    ("onecycle_adam", lambda W, b: O.Adam([W, b], lr=0.01),
     lambda o: O.lr_scheduler.OneCycleLR(o, 0.05, total_steps=8, base_momentum=0.8, max_momentum=0.9), 8),
    ("onecycle_no_momentum", lambda W, b: O.Adam([W, b], lr=0.01),
     lambda o: O.lr_scheduler.OneCycleLR(o, 0.05, total_steps=6, cycle_momentum=False), 6),
    ("multistep", two_groups_sgd, lambda o: O.lr_scheduler.MultiStepLR(o, [2, 5, 5], 0.5), 8),
    ("exponential", two_groups_sgd, lambda o: O.lr_scheduler.ExponentialLR(o, 0.9), 5),
    ("linear", two_groups_sgd, lambda o: O.lr_scheduler.LinearLR(o, 0.25, 0.75, 4), 7),
    ("constant", two_groups_sgd, lambda o: O.lr_scheduler.ConstantLR(o, 0.5, 3), 5),
]
print("// schedulers: name, lr of every group after construction and each step (flattened), momentum/beta1 likewise")
for name, mk_opt, mk_sched, steps in scheds:
    lrs, moms = sched_run(mk_opt, mk_sched, steps)
    print('{"%s", %s, %s},' % (name, fmt(torch.tensor(lrs)), fmt(torch.tensor(moms))))

print("// clip_grad_norm_: norm_type, max_norm, total norm, clipped grads of g1 then g2")
G1 = torch.tensor([[1.0, -2.0, 0.5], [3.0, 0.0, -1.5]])
G2 = torch.tensor([0.25, -4.0])
for norm_type, max_norm in [(2.0, 1.0), (1.0, 2.5), (3.0, 100.0), (math.inf, 2.0)]:
    p1 = torch.zeros(2, 3, requires_grad=True)
    p2 = torch.zeros(2, requires_grad=True)
    p1.grad = G1.clone()
    p2.grad = G2.clone()
    total = torch.nn.utils.clip_grad_norm_([p1, p2], max_norm, norm_type)
    print("{%r, %r, %r, %s, %s}," % (norm_type, max_norm, float(total), fmt(p1.grad), fmt(p2.grad)))

print("// ReduceLROnPlateau: lr of both groups after each step on the metrics below")
METRICS = [1.0, 0.9, 0.95, 0.95, 0.95, 0.8, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85, 0.85]
for name, kw in [("plateau_min", dict(factor=0.5, patience=2, cooldown=1, min_lr=0.02)),
                 ("plateau_max_abs", dict(mode="max", factor=0.3, patience=1, threshold=0.06, threshold_mode="abs"))]:
    W = W0.clone().requires_grad_()
    b = B0.clone().requires_grad_()
    opt = two_groups_sgd(W, b)
    sched = O.lr_scheduler.ReduceLROnPlateau(opt, **kw)
    lrs = []
    for m in METRICS:
        opt.step()
        sched.step(m)
        lrs.append([g["lr"] for g in opt.param_groups])
    print('{"%s", %s},' % (name, fmt(torch.tensor(lrs))))

print("// clip_grad_value_: clip value, clipped g1 then g2")
for clip in [0.5, 2.0]:
    p1 = torch.zeros(2, 3, requires_grad=True)
    p2 = torch.zeros(2, requires_grad=True)
    p1.grad = G1.clone()
    p2.grad = G2.clone()
    torch.nn.utils.clip_grad_value_([p1, p2], clip)
    print("{%r, %s, %s}," % (clip, fmt(p1.grad), fmt(p2.grad)))
