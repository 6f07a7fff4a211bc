#!/usr/bin/env python3
"""Wait for a service's /healthz, then report workers w<FIRST>..w<FIRST+COUNT-1>.

Usage: seed_workers.py BASE_URL FIRST COUNT

Used by schemathesis.sh and bench_shedding.sh. With SCORER_TOKEN set, the
report carries it as a bearer token (the agent role's). Worker i reports CPU
0.1 + 0.05·i, queue depth i and RTT p99 5 + i ms, so their scores differ.
Exits non-zero when the service does not answer within 60 s.
"""
import json
import os
import sys
import time
import urllib.request

base, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
deadline = time.time() + 60
while True:
    try:
        urllib.request.urlopen(base + "/healthz", timeout=1).read()
        break
    except Exception:
        if time.time() > deadline:
            sys.exit("service did not start within 60 s")
        time.sleep(0.2)
now = int(time.time() * 1000)
snaps = [{"worker_id": f"w{i}", "timestamp_ms": now, "cpu_usage": 0.1 + 0.05 * i, "queue_depth": i,
          "rtt_ms_avg": 2.0, "rtt_ms_p99": 5.0 + i, "error_rate": 0.0}
         for i in range(first, first + count)]
headers = {"content-type": "application/json"}
if os.environ.get("SCORER_TOKEN"):
    headers["authorization"] = "Bearer " + os.environ["SCORER_TOKEN"]
req = urllib.request.Request(base + "/v1/telemetry", data=json.dumps({"snapshots": snaps}).encode(),
                             headers=headers)
urllib.request.urlopen(req, timeout=5).read()
