# shared/bench/torch_reference.py's GPT-2 step (its GPT_SIZE, GPT_T, GPT_B and MODES
# variables) timed on its protocol (its first step, then warm-up steps, then steps back to
# back), with NVML's energy counter polled while the timed steps run, measured as gtc's
# `--bench` energy line measures it (joules a step, mean power against the enforced limit;
# the power between the counter's first and last change, rt::EnergyWindow), added to
# torch_reference.py's JSON line as "j_per_step", "watts" and "limit_w" (absent where the
# driver has no NVML). WARM (6) counts the warm-up steps with torch_reference.py's first,
# as gtc's --bench-warmup does; WARM 6 and ITERS 20 are torch_reference.py's own timing
# and issue 37's protocol, a long run (WARM 50, ITERS 200) the power-limited steady state
# a training run lives in. BUNDLE is the folder that holds torch_reference.py.
import contextlib, ctypes, json, os, sys, threading, time
import torch

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

class EnergyPoller:
    """NVML's energy counter polled every millisecond on a thread while timed steps run.
    The counter moves about every 100 ms (nvml_interval.py), so two reads at arbitrary
    moments are off by up to an interval's energy at each end; the mean power is taken
    between its first and last change seen (gtc's rt::EnergyWindow). A change happened
    after the previous read began and before this one ended: it is dated at the middle
    of that gap, and only marks an end when the gap is at most MAX_GAP (the thread may
    wait for the GIL anywhere; one NVML read takes about 3 ms)."""
    MAX_GAP = 0.02  # rt::EnergyWindow::kMaxGapSeconds

    def __init__(self):
        self.reads, self.done = [], threading.Event()
        self.thread = threading.Thread(target=self.poll, daemon=True)

    def poll(self):
        while not self.done.is_set():
            before = time.perf_counter()
            mj = energy_mj()
            self.reads.append((before, mj, time.perf_counter()))
            time.sleep(0.001)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()

    def watts(self):
        """(watts, seconds) between the first and last fresh change, or None without two."""
        changes = [((prev[0] + r[2]) / 2, r[1]) for r, prev in zip(self.reads[1:], self.reads)
                   if r[1] != prev[1] and r[2] - prev[0] <= self.MAX_GAP]
        if len(changes) < 2 or changes[-1][1] <= changes[0][1]:
            return None
        seconds = changes[-1][0] - changes[0][0]
        return (changes[-1][1] - changes[0][1]) / 1000 / seconds, seconds

WARM, ITERS = int(os.environ.get("WARM", 6)), int(os.environ.get("ITERS", 20))
energies = []  # one a timed run, in torch_reference.results' order

def timeit(step, warm=5, iters=20):
    """torch_reference.run's timing of its step (after the first step it ran itself),
    with this run's counts and the energy counter polled meanwhile."""
    for _ in range(WARM - 1):
        step()
    torch.cuda.synchronize()
    poller = EnergyPoller() if nvml else None
    with poller or contextlib.nullcontext():
        t0 = time.perf_counter()
        for _ in range(ITERS):
            step()
        torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / ITERS
    power = poller.watts() if poller else None
    energies.append(dict(j_per_step=power[0] * t, watts=power[0], window_s=power[1], limit_w=limit_w())
                    if power else {})
    return t

if __name__ == "__main__":
    # Imported here, so that nvml_interval.py can use the NVML reader above without the bundle.
    sys.path.insert(0, os.environ.get("BUNDLE", "gpu-bundle"))
    import torch_reference as tr
    # torch_reference.py's own GPT-2 runs (its models, sizes, batches and FLOP counts), without
    # its GEMM and copy ceilings, which are not this script's figures.
    tr.timeit = timeit
    tr.ceilings = lambda: None
    os.environ["ONLY"] = "gpt2"
    tr.main()
    for r, energy in zip(tr.results, energies):
        r = dict(r, warm=WARM, iters=ITERS, **energy)
        print(json.dumps(r), flush=True)
        e = "no NVML energy counter"
        if energy:
            limit = f" (limit {r['limit_w']:.0f} W)" if r["limit_w"] else ""
            e = f"{r['j_per_step']:.2f} J/step at {r['watts']:.0f} W over {r['window_s']:.2f} s{limit}"
        print(f"torch {r['mode']} {r['what']} B {os.environ.get('GPT_B', 16)}, {WARM} + {ITERS} steps: "
              f"{r['ms_per_step']:.4f} ms/step; {e}", flush=True)
