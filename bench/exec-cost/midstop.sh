#!/bin/sh
# What happens when a container is stopped while a path-b (runc exec) process runs in it?
# Case 1: own pid namespace.  Case 2: pod-style shared pid namespace (--pid container:pause).
R=/run/docker/runtime-runc/moby
IMG=dockerlet.local/busybox:1
for mode in own shared; do
  if [ $mode = own ]; then
    C=$(docker run -d --label execcost=1 $IMG sleep 100000)
  else
    P=$(docker run -d --label execcost=1 $IMG sleep 100000)
    C=$(docker run -d --label execcost=1 --pid container:$P $IMG sleep 100000)
  fi
  sleep 0.5
  t0=$(date +%s.%N)
  ( runc --root $R exec $C sleep 60; echo "[$mode] runc exec rc=$? after $(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || true)s" ) &
  sleep 1
  echo "[$mode] docker top while exec runs:"; docker top $C -o pid,args | sed 's/^/    /'
  echo "[$mode] docker inspect ExecIDs: $(docker inspect -f '{{.ExecIDs}}' $C)"
  ts=$(date +%s.%N); docker stop -t 5 $C >/dev/null; echo "[$mode] docker stop took $(python3 -c "import time;print(round(time.time()-$ts,2))")s"
  wait
  echo "[$mode] leftover 'sleep 60' processes on host: $(pgrep -fc 'sleep 60' || true)"
  echo "[$mode] container state: $(docker inspect -f '{{.State.Status}} exit={{.State.ExitCode}}' $C)"
done
docker rm -f $(docker ps -aq --filter label=execcost=1) >/dev/null
