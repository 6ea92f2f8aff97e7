import json, time, msgspec
from typing import Any
obj = {"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-00042","namespace":"default","uid":"5f0c1b8e-8a3c-4c1e-9a57-0c8e5b6f1d2a","resourceVersion":"123456","creationTimestamp":"2026-12-02T10:00:00Z","labels":{"app":"bench","tier":"x"},"managedFields":[{"manager":"bench","operation":"Update","apiVersion":"v1","time":"2026-12-02T10:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}}}}]},"data":{"payload":"x"*700}}}
line = json.dumps(obj, separators=(",",":")).encode()
print("line bytes", len(line))
N=200_000
class Ev(msgspec.Struct):
    type: str
    object: dict[str, Any]
dec = msgspec.json.Decoder(Ev)
for name, f in [("json.loads", json.loads), ("msgspec dict", msgspec.json.decode), ("msgspec typed envelope", dec.decode)]:
    t=time.perf_counter()
    for _ in range(N): f(line)
    dt=time.perf_counter()-t
    print(f"{name:25s} {N/dt:10,.0f} lines/s")
