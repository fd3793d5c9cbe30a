# shared/bench/torch_reference.py's GPT-2 step (its GPT_SIZE, GPT_T, GPT_B and MODES
# variables) timed on its protocol (its first step, then warm-up steps, then steps back to
# back), with NVML's energy counter read around the timed steps: the figures of gtc's
# `--bench` energy line (joules a step, mean power against the enforced limit), added to
# torch_reference.py's JSON line as "j_per_step", "watts" and "limit_w" (absent where the
# driver has no NVML). WARM (6) counts the warm-up steps with torch_reference.py's first,
# as gtc's --bench-warmup does; WARM 6 and ITERS 20 are torch_reference.py's own timing
# and issue 37's protocol, a long run (WARM 50, ITERS 200) the power-limited steady state
# a training run lives in. BUNDLE is the folder that holds torch_reference.py.
import ctypes, json, os, sys, time
import torch
sys.path.insert(0, os.environ.get("BUNDLE", "gpu-bundle"))
import torch_reference as tr

def nvml_device():
    """NVML's handle of the device PyTorch runs on, found by UUID (NVML's indices ignore
    CUDA_VISIBLE_DEVICES), or None without NVML."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return None, None
    if lib.nvmlInit_v2() != 0:
        return None, None
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    uuid = (uuid if uuid.startswith("GPU-") else "GPU-" + uuid).encode()
    dev = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByUUID(uuid, ctypes.byref(dev)) != 0:
        return None, None
    return lib, dev

nvml, dev = nvml_device()

def energy_mj():
    e = ctypes.c_ulonglong()
    return e.value if nvml and nvml.nvmlDeviceGetTotalEnergyConsumption(dev, ctypes.byref(e)) == 0 else None

def limit_w():
    mw = ctypes.c_uint()
    return mw.value / 1000 if nvml and nvml.nvmlDeviceGetEnforcedPowerLimit(dev, ctypes.byref(mw)) == 0 else None

WARM, ITERS = int(os.environ.get("WARM", 6)), int(os.environ.get("ITERS", 20))
energy = {}

def timeit(step, warm=5, iters=20):
    """torch_reference.run's timing of its step (after the first step it ran itself),
    with this run's counts and the energy counter."""
    for _ in range(WARM - 1):
        step()
    torch.cuda.synchronize()
    e0, t0 = energy_mj(), time.perf_counter()
    for _ in range(ITERS):
        step()
    torch.cuda.synchronize()
    t, e1 = time.perf_counter() - t0, energy_mj()
    energy.clear()
    if e0 is not None and e1 is not None:
        energy.update(j_per_step=(e1 - e0) / 1000 / ITERS, watts=(e1 - e0) / t / 1000, limit_w=limit_w())
    return t / ITERS

tr.timeit = timeit
size = os.environ.get("GPT_SIZE", "124m")
L, d, nh = {"124m": (12, 768, 12), "355m": (24, 1024, 16), "774m": (36, 1280, 20), "1558m": (48, 1600, 25)}[size]
B, T = int(os.environ.get("GPT_B", 16)), int(os.environ.get("GPT_T", 1024))
for mode in os.environ.get("MODES", "compile").split(","):
    m = tr.GPT(T=T, L=L, d=d, nh=nh).to("cuda")
    nparam = sum(p.numel() for p in m.parameters()) - m.wpe.weight.numel()
    flops = 6 * nparam * B * T + 12 * L * d * T * B * T  # torch_reference.py's count
    # torch_reference.run prints its JSON line; this one adds the energy.
    tr.run(f"gpt2-{size}" + ("" if T == 1024 else f"-t{T}"), m,
           lambda: (torch.randint(0, 50257, (B, T), device="cuda"), torch.randint(0, 50257, (B, T), device="cuda")),
           mode, flops, B * T, "tokens_per_s")
    r = dict(tr.results[-1], warm=WARM, iters=ITERS, **energy)
    print(json.dumps(r), flush=True)
    e = "no NVML energy counter"
    if energy:
        limit = f" (limit {r['limit_w']:.0f} W)" if r["limit_w"] else ""
        e = f"{r['j_per_step']:.2f} J/step at {r['watts']:.0f} W{limit}"
    print(f"torch {mode} {r['what']} B {B}, {WARM} + {ITERS} steps: {r['ms_per_step']:.4f} ms/step; {e}", flush=True)
    del m
    torch.cuda.empty_cache()
