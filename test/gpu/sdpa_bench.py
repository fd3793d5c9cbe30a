"""torch.nn.functional.scaled_dot_product_attention, forward and backward,
bf16, causal, at GPT-2 124M's shape (B=16, H=12, T=1024, d=64): the
reference for gtc's tensor-core attention (test/gpu/attention.gt). Times
with CUDA events after warm-up (medians of 20); FLOPs counted as
FlashAttention does (forward 4 B H T^2 d / 2 with the causal half,
backward 2.5 times that).

`sdpa_bench.py D HKV [T [B]]` with HKV < 768 / D key/value heads times
grouped-query attention (test/gpu/attention_gqa.gt) two ways: SDPA with enable_gqa=True,
and SDPA on K and V repeated to H heads inside the timed step (as
transformers' repeat_kv does)."""
import sys
import torch
import torch.nn.functional as F

B, H, T, d = 16, 12, 1024, 64
if len(sys.argv) > 1:
    d = int(sys.argv[1])
    H = 768 // d
HKV = int(sys.argv[2]) if len(sys.argv) > 2 else H
T = int(sys.argv[3]) if len(sys.argv) > 3 else T
B = int(sys.argv[4]) if len(sys.argv) > 4 else B
q = torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k, v = (torch.randn(B, HKV, T, d, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True) for _ in range(2))
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


def report(name, fwd):
    def fwd_bwd():
        fwd().backward(g)
    flops = 4 * B * H * T * T * d / 2
    tf = timed(fwd)
    tfb = timed(fwd_bwd)
    print(f"{name} {torch.cuda.get_device_name()} B={B} H={H} Hkv={HKV} T={T} "
          f"d={d} causal bf16: forward {tf:.3f} ms ({flops / tf / 1e9:.0f} "
          f"TFLOP/s), backward {tfb - tf:.3f} ms "
          f"({2.5 * flops / (tfb - tf) / 1e9:.0f} TFLOP/s), forward+backward "
          f"{tfb:.3f} ms ({3.5 * flops / tfb / 1e9:.0f} TFLOP/s)")


if HKV == H:
    report("sdpa", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
else:
    report("sdpa-gqa", lambda: F.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=True))
    report("sdpa-repeat", lambda: F.scaled_dot_product_attention(
        q, k.repeat_interleave(H // HKV, dim=1),
        v.repeat_interleave(H // HKV, dim=1), is_causal=True))
