"""torch.nn.functional.scaled_dot_product_attention, forward and backward,
bf16, causal, at GPT-2 124M's shape (B=16, H=12, T=1024, d=64): the
reference for gtc's tensor-core attention (test/gpu/attention.gt). Times
with CUDA events after warm-up; FLOPs counted as FlashAttention does
(forward 4 B H T^2 d / 2 with the causal half, backward 2.5 times that)."""
import sys
import torch
import torch.nn.functional as F

B, H, T, d = 16, 12, 1024, 64
if len(sys.argv) > 1:
    d = int(sys.argv[1])
    H = 768 // d
q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16,
                       requires_grad=True) for _ in range(3))
g = torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16)


def timed(fn, iters=20):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def fwd():
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def fwd_bwd():
    y = fwd()
    y.backward(g)


flops = 4 * B * H * T * T * d / 2
tf = timed(fwd)
tfb = timed(fwd_bwd)
print(f"sdpa {torch.cuda.get_device_name()} B={B} H={H} T={T} d={d} causal bf16: "
      f"forward {tf:.3f} ms ({flops / tf / 1e9:.0f} TFLOP/s), backward "
      f"{tfb - tf:.3f} ms ({2.5 * flops / (tfb - tf) / 1e9:.0f} TFLOP/s), "
      f"forward+backward {tfb:.3f} ms ({3.5 * flops / tfb / 1e9:.0f} TFLOP/s)")
