# kernels_cpu_torch.py — PyTorch's side of bench/kernels_cpu.lua (same cases, names, protocol and output).
import torch, time, os
nn = torch.nn
torch.set_num_threads(int(os.environ.get("T", "1")))
clk = time.process_time if os.environ.get("CLK", "2") == "2" else time.perf_counter
only = os.environ.get("ONLY")
def bench(name, fn, n=20):
    if only and only not in name: return
    w0, w = clk(), 0  # warm-up to the steady state: at least 3 calls and 0.2 s of CPU time (kernels_cpu.lua)
    while w < 3 or clk() - w0 < 0.2:
        fn(); w += 1
    t = []
    for i in range(5):
        t0 = clk()
        for _ in range(n): fn()
        t.append((clk() - t0) / n * 1e6)
    t.sort(); print(f"{name} {t[2]:.2f}")
def fb(m, x):
    params = list(m.parameters()) + [x]; g = [None]
    def f():
        y = m(x)
        if g[0] is None: g[0] = torch.ones(y.shape)
        y.backward(g[0])
        for p in params: p.grad = None
    return f
torch.manual_seed(0)
x = torch.randn(16, 4, 64, 64, requires_grad=True); g = torch.randn(16, 4, 64, 64)
def sfb(d, log=False):
    def f():
        (x.log_softmax(d) if log else x.softmax(d)).backward(g); x.grad = None
    return f
bench("softmax_fb_4d_last", sfb(3)); bench("softmax_fb_4d_dim2", sfb(1)); bench("log_softmax_fb_4d_last", sfb(3, True))
xs, gs = torch.randn(4096, 16, 4, requires_grad=True), torch.randn(4096, 16, 4)
def small_inner():
    xs.softmax(1).backward(gs); xs.grad = None
bench("softmax_fb_small_inner", small_inner)
a = torch.randn(64, 16)
bench("softmax 64x16", lambda: a.softmax(1), 2000)
bench("log_softmax 64x16", lambda: a.log_softmax(1), 2000)
b, bias = torch.randn(1024, 1024), torch.randn(1024)
bench("add_bias_row 1024x1024", lambda: b + bias, 50)
m1, m2 = torch.randn(1024, 128), torch.randn(128, 128)
bench("matmul 1024x128x128", lambda: m1.matmul(m2), 200)
X, perm, pos = torch.randn(60000, 784), torch.randperm(60000), [0]  # a training batch gathered from a large data set
def gather64():
    if pos[0] + 64 > 60000: pos[0] = 0
    pos[0] += 64
    return X.index_select(0, perm.narrow(0, pos[0] - 64, 64))
bench("index_select 64 rows of 60000x784", gather64, 200)
B = 16
x4 = lambda c, h, w: torch.randn(B, c, h, w, requires_grad=True)
x3 = lambda c, l: torch.randn(B, c, l, requires_grad=True)
bench("dilated_conv2d", fb(nn.Conv2d(64, 64, 3, padding=2, dilation=2), x4(64, 28, 28)), 5)
bench("conv1d k5", fb(nn.Conv1d(128, 128, 5, padding=2), x3(128, 128)), 5)
bench("conv1d k11 s2", fb(nn.Conv1d(40, 64, 11, stride=2, padding=5), x3(40, 400)), 5)
bench("adaptive_avg_pool2d 1", fb(nn.AdaptiveAvgPool2d(1), x4(512, 7, 7)), 50)
bench("adaptive_max_pool2d 7", fb(nn.AdaptiveMaxPool2d(7), x4(256, 13, 13)), 20)
bench("conv2d 3->64 k4 s2 64x64", fb(nn.Conv2d(3, 64, 4, stride=2, padding=1), x4(3, 64, 64)), 5)
bench("conv2d 64->128 k4 s2 32x32", fb(nn.Conv2d(64, 128, 4, stride=2, padding=1), x4(64, 32, 32)), 5)
bench("conv2d 128->256 k4 s2 16x16", fb(nn.Conv2d(128, 256, 4, stride=2, padding=1), x4(128, 16, 16)), 5)
bench("conv_transpose2d 32->1 k4 s2 32x32", fb(nn.ConvTranspose2d(32, 1, 4, stride=2, padding=1), x4(32, 32, 32)), 5)
bench("conv_transpose2d 64->3 k4 s2 32x32", fb(nn.ConvTranspose2d(64, 3, 4, stride=2, padding=1), x4(64, 32, 32)), 5)
lstm, xl = nn.LSTM(256, 256), torch.randn(35, 32, 256, requires_grad=True)
def lstm_fb():
    y, _ = lstm(xl); y.sum().backward()
    for p in list(lstm.parameters()) + [xl]: p.grad = None
bench("lstm fwd+bwd H256 T35 B32", lstm_fb, 3)
with torch.no_grad():
    bench("lstm fwd H256 T35 B32", lambda: lstm(xl), 5)
