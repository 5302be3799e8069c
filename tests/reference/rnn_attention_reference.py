# Generates the PyTorch values hard-coded in tests/test_nn_rnn_attention.cpp.
# Run with Debian's python3-torch: /usr/bin/python3 tests/reference/rnn_attention_reference.py
# Parameters and inputs are closed-form (sin of the flat index) so the C++ test
# rebuilds them exactly; what it needs from PyTorch is the state-dict key list,
# the shapes, and the outputs.
import math
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def wave(shape, k):  # 0.5 sin(0.37 i + 1.3 k + 0.1) over the flat index i
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.float64)
    return (0.5 * torch.sin(0.37 * i + 1.3 * k + 0.1)).reshape(shape)


def load_waves(module):  # the k-th state-dict entry gets wave(shape, k)
    with torch.no_grad():
        for k, (name, p) in enumerate(module.state_dict().items()):
            p.copy_(wave(p.shape, k))


def show(name, t):
    print(f"  // {name} {list(t.shape)}")
    print("  {" + ", ".join(repr(v) for v in t.detach().reshape(-1).tolist()) + "}")


def keys(module):
    print("  keys: " + ", ".join(f'"{k}"' for k in module.state_dict().keys()))
    print("  shapes: " + ", ".join(str(list(v.shape)) for v in module.state_dict().values()))


print("LSTM(4, 5, num_layers=2), x [3, 2, 4] = wave(k=100), h0 = wave(k=101), c0 = wave(k=102)")
lstm = torch.nn.LSTM(4, 5, num_layers=2)
load_waves(lstm)
keys(lstm)
out, (h, c) = lstm(wave((3, 2, 4), 100), (wave((2, 2, 5), 101), wave((2, 2, 5), 102)))
show("output", out)
show("h_n", h)
show("c_n", c)

print("GRU(4, 5, num_layers=2, batch_first=True, bidirectional=True), x [2, 3, 4] = wave(k=100)")
gru = torch.nn.GRU(4, 5, num_layers=2, batch_first=True, bidirectional=True)
load_waves(gru)
keys(gru)
out, h = gru(wave((2, 3, 4), 100))
show("output", out)
show("h_n", h)

print("LSTM(4, 3, bidirectional=True), unbatched x [3, 4] = wave(k=100), no bias")
lstm = torch.nn.LSTM(4, 3, bias=False, bidirectional=True)
load_waves(lstm)
keys(lstm)
out, (h, c) = lstm(wave((3, 4), 100))
show("output", out)
show("h_n", h)
show("c_n", c)

print("MultiheadAttention(8, 2): query [3, 2, 8] = wave(k=100), key [4, 2, 8] = wave(k=101), value = wave(k=102)")
mha = torch.nn.MultiheadAttention(8, 2)
load_waves(mha)
keys(mha)
kpm = torch.tensor([[False, False, True, False], [False, False, False, True]])
attn_mask = wave((3, 4), 103)
attn_mask[0, 1] = -math.inf
q, k, v = wave((3, 2, 8), 100), wave((4, 2, 8), 101), wave((4, 2, 8), 102)
print("  key_padding_mask", kpm.tolist(), "attn_mask = wave((3, 4), 103) with [0, 1] = -inf")
out, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask)
show("attn_output", out)
show("attn_weights (averaged)", w)
_, w = mha(q, k, v, key_padding_mask=kpm, attn_mask=attn_mask, average_attn_weights=False)
show("attn_weights (per head)", w)

print("MultiheadAttention(6, 3, bias=False, batch_first=True), self-attention x [2, 3, 6] = wave(k=100)")
mha = torch.nn.MultiheadAttention(6, 3, bias=False, batch_first=True)
load_waves(mha)
keys(mha)
x = wave((2, 3, 6), 100)
out, w = mha(x, x, x, need_weights=True)
show("attn_output", out)
show("attn_weights", w)
