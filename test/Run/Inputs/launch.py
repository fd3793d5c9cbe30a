"""Starts argv[3:] as argv[1] processes with a launcher's variables, the way
torchrun, srun or mpirun would (argv[2]: torchrun, slurm, openmpi, or file:DIR
for torchrun's rank variables with a file rendezvous), on a free local port,
and exits with the first non-zero status of them (0 if all succeed). "{rank}"
in an argument becomes the process's rank."""
import os
import socket
import subprocess
import sys

n, scheme, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
names = {
    "torchrun": ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
    "slurm": ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
    "openmpi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK"),
}
procs = []
for r in range(n):
    env = dict(os.environ)
    rank, size, local = names.get(scheme, names["torchrun"])
    env.update({rank: str(r), size: str(n), local: str(r)})
    args = [a.replace("{rank}", str(r)) for a in cmd]
    if scheme.startswith("file:"):
        args.append("--rendezvous=" + scheme)
    else:
        env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
    procs.append(subprocess.Popen(args, env=env,
                                  stdout=None if r == 0 else subprocess.DEVNULL))
codes = [p.wait() for p in procs]
sys.exit(next((c for c in codes if c != 0), 0))
