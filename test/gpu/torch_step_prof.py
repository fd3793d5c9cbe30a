# Two steps of shared/bench/torch_llama.py's model (CONFIG, MODE compile or bf16) between
# cudaProfilerStart and Stop, after 5 warm-ups: for `ncu --profile-from-start off`
# (test/gpu/run.sh kernels). BUNDLE is the folder that holds torch_llama.py.
import os, sys, torch
sys.path.insert(0, os.environ.get("BUNDLE", "gpu-bundle"))
import torch_llama as tl
c = tl.CONFIGS[os.environ.get("CONFIG", "llama124m")]
torch.manual_seed(0)
m = tl.Llama(c).cuda()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4, fused=True)
fwd = torch.compile(m) if os.environ.get("MODE", "compile") == "compile" else m
x = torch.randint(0, c["V"], (c["B"], c["T"]), device="cuda"); y = torch.randint(0, c["V"], (c["B"], c["T"]), device="cuda")
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = fwd(x, y)
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(5): step()
torch.cuda.synchronize()
torch.cuda.profiler.start()
for _ in range(2): step()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("done")
