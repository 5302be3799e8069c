"""torch.amp.GradScaler step by step (tests/test_grad_scaler.cpp), made with
PyTorch 2.x on the CPU in float32:

    python3 -m venv venv && venv/bin/pip install torch==2.15.0 safetensors
    venv/bin/python tests/reference/grad_scaler_reference.py

A linear least-squares model trained by SGD with momentum for 10 steps under
GradScaler(init_scale=1024, growth_factor=2, backoff_factor=0.5,
growth_interval=2); step 3's gradient gets an inf, step 6's a NaN (both
steps are skipped and the scale backs off), step 7 unscales and clips the
gradient norm before stepping. Writes tests/data/grad_scaler_reference.safetensors:
`w0`, `x`, `t` (the start and the data), `w` [10, 3, 2] (the weight after
each step), `scale` [10] and `tracker` [10] (scale and growth tracker after
each update, float64), `stepped` [10] (1 where the optimizer stepped).
"""
import math
import pathlib

import torch
from safetensors.torch import save_file


def main():
    g = torch.Generator().manual_seed(0)
    w0 = torch.randn(3, 2, generator=g)
    x = torch.randn(4, 3, generator=g)
    t = torch.randn(4, 2, generator=g)
    w = torch.nn.Parameter(w0.clone())
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=2.0, backoff_factor=0.5, growth_interval=2)
    ws, scales, trackers, stepped = [], [], [], []
    for step in range(10):
        opt.zero_grad()
        loss = ((x @ w - t) ** 2).mean()
        scaler.scale(loss).backward()
        if step == 3:
            w.grad[0, 0] = math.inf
        if step == 6:
            w.grad[1, 1] = math.nan
        if step == 7:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_([w], 0.05)
        before = w.detach().clone()
        scaler.step(opt)
        scaler.update()
        stepped.append(0.0 if torch.equal(before, w.detach()) else 1.0)
        ws.append(w.detach().clone())
        scales.append(scaler.get_scale())
        trackers.append(float(scaler.state_dict()["_growth_tracker"]))
    out = {
        "w0": w0, "x": x, "t": t, "w": torch.stack(ws),
        "scale": torch.tensor(scales, dtype=torch.float64),
        "tracker": torch.tensor(trackers, dtype=torch.float64),
        "stepped": torch.tensor(stepped, dtype=torch.float64),
    }
    path = pathlib.Path(__file__).resolve().parents[1] / "data" / "grad_scaler_reference.safetensors"
    save_file({k: v.contiguous() for k, v in out.items()}, str(path))
    print(f"wrote {len(out)} tensors to {path} (torch {torch.__version__}); scales {scales}, stepped {stepped}")


if __name__ == "__main__":
    main()
