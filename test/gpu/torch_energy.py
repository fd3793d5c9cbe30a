# shared/bench/torch_reference.py's GPT-2 step (its GPT_SIZE, GPT_T, GPT_B and MODES
# variables) with its timing loop replaced by one of WARM warm-up steps and ITERS timed
# steps that also reads NVML's energy counter before and after: the same figures as gtc's
# `--bench` energy line (joules a step, mean power against the enforced limit). WARM 6 and
# ITERS 20 are issue 37's protocol; a long run (WARM 50, ITERS 200) shows the power-limited
# steady state a training run lives in. BUNDLE is the folder that holds torch_reference.py.
import ctypes, json, os, sys, time
import torch
sys.path.insert(0, os.environ.get("BUNDLE", "gpu-bundle"))
import torch_reference as tr

nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0, "nvmlInit failed"
dev = ctypes.c_void_p()
# The device PyTorch runs on, by its UUID (NVML's indices ignore CUDA_VISIBLE_DEVICES).
uuid = str(torch.cuda.get_device_properties(0).uuid)
uuid = (uuid if uuid.startswith("GPU-") else "GPU-" + uuid).encode()
assert nvml.nvmlDeviceGetHandleByUUID(uuid, ctypes.byref(dev)) == 0, f"no NVML device {uuid}"

def energy_mj():
    e = ctypes.c_ulonglong()
    assert nvml.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(e)) == 0
    return e.value

def limit_w():
    mw = ctypes.c_uint()
    return mw.value / 1000 if nvml.nvmlDeviceGetEnforcedPowerLimit(dev, ctypes.byref(mw)) == 0 else 0

WARM, ITERS = int(os.environ.get("WARM", 6)), int(os.environ.get("ITERS", 20))
energy = {}

def timeit(step, warm=5, iters=20):
    # torch_reference.run's call (the GPT step), with this run's counts and the energy counter.
    for _ in range(WARM):
        step()
    torch.cuda.synchronize()
    e0, t0 = energy_mj(), time.perf_counter()
    for _ in range(ITERS):
        step()
    torch.cuda.synchronize()
    t, e1 = time.perf_counter() - t0, energy_mj()
    energy.update(j_per_step=(e1 - e0) / 1000 / ITERS, watts=(e1 - e0) / t / 1000)
    return t / ITERS

tr.timeit = timeit
L, d, nh = {"124m": (12, 768, 12), "355m": (24, 1024, 16), "774m": (36, 1280, 20), "1558m": (48, 1600, 25)}[os.environ.get("GPT_SIZE", "124m")]
B, T = int(os.environ.get("GPT_B", 16)), int(os.environ.get("GPT_T", 1024))
for mode in os.environ.get("MODES", "compile").split(","):
    m = tr.GPT(T=T, L=L, d=d, nh=nh).to("cuda")
    tr.run(f"gpt2-{os.environ.get('GPT_SIZE', '124m')}", m,
           lambda: (torch.randint(0, 50257, (B, T), device="cuda"), torch.randint(0, 50257, (B, T), device="cuda")),
           mode, 0, B * T, "tokens_per_s")
    r = tr.results[-1]
    print(f"torch {mode} {r['what']} B {B} T {T}, {WARM} + {ITERS} steps: {r['ms_per_step']:.4f} ms/step; "
          f"{energy['j_per_step']:.2f} J/step at {energy['watts']:.0f} W (limit {limit_w():.0f} W)", flush=True)
    del m
    torch.cuda.empty_cache()
