"""Model inference latency inside the running service (docs/performance.md).

Usage: python3 scripts/inference_in_service.py PORT  (service already running
on 127.0.0.1:PORT). Keeps 16 workers fresh with telemetry every 0.5 s, then
sends `POST /v1/score` for all 16 one at a time on a keep-alive connection,
first 400 with a 5 ms pause between requests, then 1 500 back to back, twice,
and prints p50/p90/p99 of the answers' `model.inference_us` (answers that fell
back to the rules carry none: n < requests counts budget misses too).
"""
import http.client, json, time, threading, sys, statistics
PORT=int(sys.argv[1])
workers=[f"w{i}" for i in range(16)]
stop=False
def telem():
    c=http.client.HTTPConnection("127.0.0.1",PORT)
    while not stop:
        now=int(time.time()*1000)
        snaps=[{"worker_id":w,"timestamp_ms":now,"cpu_usage":0.1+0.05*i,"queue_depth":i,"rtt_ms_avg":1.0,"rtt_ms_p99":5.0+i,"error_rate":0.0,"disk_io_await_ms":float(i*3)} for i,w in enumerate(workers)]
        c.request("POST","/v1/telemetry",json.dumps({"snapshots":snaps}),{"content-type":"application/json"})
        c.getresponse().read()
        time.sleep(0.5)
t=threading.Thread(target=telem,daemon=True); t.start()
time.sleep(1)
c=http.client.HTTPConnection("127.0.0.1",PORT)
body=json.dumps({"key":"order:42","candidates":workers,"context":{"timeout_ms":30},"explain":True})
def phase(n,gap):
    xs=[]
    for i in range(n):
        c.request("POST","/v1/score",body,{"content-type":"application/json"})
        d=json.loads(c.getresponse().read())
        m=d.get("model",{})
        if m.get("inference_us") is not None: xs.append(m["inference_us"])
        if gap: time.sleep(gap)
    xs.sort()
    q=lambda p: xs[min(len(xs)-1,int(p*len(xs)))]
    return f"n={len(xs)} p50 {q(0.5):.1f} p90 {q(0.9):.1f} p99 {q(0.99):.1f} us"
for rnd in range(2):
    print("gap 5ms :", phase(400,0.005))
    print("no gap  :", phase(1500,0))
stop=True
