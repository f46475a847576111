"""Server fault cases against one `tl` binary, one line of results each:
1,100 half-sent headers (then /health, at once and after the header
timeout), a body declared at 10^18 bytes, two 4 MiB /tokenize calls (and
/health meanwhile), and 100,000 stop strings. The server runs with at most
1,024 open files (a common default), the client with its hard limit, so what
runs out is the server's (docs/reliability.md).

Usage: python3 scripts/server_faults.py TL MODEL.gguf
"""
import json, resource, socket, subprocess, sys, threading, time

tl, model = sys.argv[1], sys.argv[2]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
proc = subprocess.Popen([tl, "serve", "-m", model, "--port", "0", "--device", "cpu", "--ctx", "256"],
                        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
addr = None
for line in proc.stderr:
    if line.startswith("listening on http://"):
        addr = line.strip().split("//")[1]; break
threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
host, port = addr.split(":"); port = int(port)

def http(method, path, body=None, timeout=30):
    s = socket.create_connection((host, port), timeout=timeout)
    data = body.encode() if isinstance(body, str) else (body or b"")
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return None
        if not chunk: break
        out += chunk
    return out.split(b" ", 2)[1].decode() if out else "closed"

def health_time(timeout=15):
    t = time.time()
    try:
        status = http("GET", "/health", timeout=timeout)
    except OSError as e:
        status = f"error {e}"
    return status, time.time() - t

# 1. Slowloris: 1100 half-sent headers.
held = []
for _ in range(1100):
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(b"POST /api/chat HTTP/1.1\r\nHost: x\r\n")
        held.append(s)
    except OSError:
        break
status, took = health_time()
print(f"slowloris 1100 half-sent headers: /health -> {status} in {took:.2f} s ({len(held)} connections made)")
time.sleep(1)
alive = 0
for s in held:
    s.settimeout(0.01)
    try:
        alive += s.recv(1) != b""
    except socket.timeout:
        alive += 1
    except OSError:
        pass
print(f"  after 1 s: {alive} still open")
time.sleep(11)
status, took = health_time()
print(f"  12 s later: /health -> {status} in {took:.2f} s")
for s in held: s.close()
time.sleep(1)

# 2. A body declared at 10^18 bytes.
s = socket.create_connection((host, port), timeout=5)
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000000000000000\r\n\r\n{")
try:
    answer = s.recv(100)
    print(f"body declared 10^18 bytes: answered {answer[:12]!r}")
except socket.timeout:
    print("body declared 10^18 bytes: no answer after 5 s, connection open")
s.close()

# 3. Two 4 MiB /tokenize calls: /health meanwhile.
big = json.dumps({"content": "word " * ((4 << 20) // 5)})
ts = [threading.Thread(target=http, args=("POST", "/tokenize", big, 120)) for _ in range(2)]
for t in ts: t.start()
time.sleep(0.3)
status, took = health_time()
print(f"two 4 MiB /tokenize: /health -> {status} in {took:.2f} s")
for t in ts: t.join()

# 4. 100k stop strings.
body = json.dumps({"model": model.rsplit("/", 1)[-1].removesuffix(".gguf"), "prompt": "Hi", "max_tokens": 4, "stop": [f"s{i}" for i in range(100000)]})
t = time.time()
r = http("POST", "/v1/completions", body, 120)
print(f"100k stop strings: {r} in {time.time()-t:.2f} s")
proc.terminate()
