export NCCL_NVLS_ENABLE=0; B=gpu-bundle; mkdir -p /tmp/b; gunzip -c $B/gtc.gz > /tmp/b/gtc; chmod +x /tmp/b/gtc
mkdir -p /usr/share/datasets/fashion-mnist; cp $B/fashion-mnist/* /usr/share/datasets/fashion-mnist/
export GTC_CACHE_DIR=/tmp/kc
GTC_TRACE_COMM=1 NCCL_DEBUG=INFO GTC_TIMEOUT=20 timeout -k 5 60 /tmp/b/gtc run examples/mlp.gt --device cuda --devices 2 --steps 20 --log-every 5 > $OUT/mlp2.txt 2>&1; echo rc=$?
grep -v "NCCL INFO" $OUT/mlp2.txt | tail -30; grep "NCCL INFO" $OUT/mlp2.txt | tail -8
