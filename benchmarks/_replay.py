"""A minimal replay server: answers every watch request with the captured watch body, from
memory, at near-zero CPU, so that events/s measures the client and not the server (the
simulator encodes and writes each event; its serving rate capped events/s at ~3x
lightkube). Plain HTTP or TLS (a trustme CA; the kubeconfig trusts it).

How the body is cut into HTTP/1.1 chunks (``--framing``); it is framed once, at start, and
written in ~256 KiB writes whatever the framing, so the server's CPU stays near zero:

- ``bulk``: ~256 KiB chunks (issue 11's harness). No API server frames a watch like this.
- ``go``: 2,048-byte chunks, what kube-apiserver sends over HTTP/1.1 while events queue up:
  Go's net/http buffers a response in ``bufferBeforeChunkingSize`` = 2048 bytes and writes
  a chunk each time that buffer fills, and the watch handler flushes only when its channel
  is empty.
- ``event``: one chunk per event, what kube-apiserver sends when the watch keeps up (a
  flush after each event), as the simulator does too.

With ``--pace N`` the server sends one event per chunk, N events a second, each chunk in a
write of its own: a watch that keeps up with a cluster making N changes a second (the
client waits for each event, as it mostly does in production).

    python -m benchmarks._replay --body FILE --kubeconfig OUT [--tls] [--framing bulk|go|event]
                                 [--pace EVENTS_PER_S]

Prints ``READY <port>`` when listening. Any other request gets a 404 Status.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
from pathlib import Path

CHUNK = 256 << 10
GO_CHUNK = 2048  # net/http's bufferBeforeChunkingSize
FRAMINGS = ("bulk", "go", "event")
_404 = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                   "reason": "NotFound", "code": 404, "message": "replay: not found"}).encode()


def _pieces(body: bytes, framing: str) -> list[bytes]:
    if framing == "event":
        return body.splitlines(keepends=True)
    size = GO_CHUNK if framing == "go" else CHUNK
    return [body[i:i + size] for i in range(0, len(body), size)]


# TLS 1.3 suites in the order Go's crypto/tls prefers them on a CPU with AES instructions, so
# the replay server negotiates what a kube-apiserver would (AES-128-GCM); OpenSSL alone
# picks AES-256-GCM. Python 3.11 cannot set TLS 1.3 suites, so OpenSSL's configuration
# file does, through OPENSSL_CONF in the server's environment (``go_tls_env``).
_GO_TLS_CONF = """openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
Ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256
Options = ServerPreference
"""


def go_tls_env(tmp: Path) -> dict[str, str]:
    """Environment for a replay server that chooses its TLS 1.3 suite as Go does."""
    conf = tmp / "go-tls.cnf"
    conf.write_text(_GO_TLS_CONF)
    return {"OPENSSL_CONF": str(conf)}


def framed(body: bytes, framing: str = "bulk") -> list[bytes]:
    """The body as HTTP/1.1 chunks (header, payload, CRLF), joined into ~256 KiB writes."""
    writes: list[bytes] = []
    batch: list[bytes] = []
    held = 0
    for piece in _pieces(body, framing):
        batch.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        held += len(piece)
        if held >= CHUNK:
            writes.append(b"".join(batch))
            batch, held = [], 0
    batch.append(b"0\r\n\r\n")
    writes.append(b"".join(batch))
    return writes


def paced(body: bytes) -> list[bytes]:
    """One HTTP chunk per event, each its own write (``serve`` spaces them out)."""
    return [b"%x\r\n%s\r\n" % (len(line), line) for line in body.splitlines(keepends=True)] + [
        b"0\r\n\r\n"]


async def _send_paced(writer: asyncio.StreamWriter, chunks: list[bytes], pace: float) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    for i, c in enumerate(chunks):
        ahead = start + i / pace - loop.time()
        if ahead > 0.001:  # sleep in steps of a millisecond or more; send what is due
            await asyncio.sleep(ahead)
        if writer.is_closing():
            return
        writer.write(c)
        if writer.transport.get_write_buffer_size() > CHUNK:
            await writer.drain()


async def serve(chunks: list[bytes], ctx: ssl.SSLContext | None,
                pace: float | None = None) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].lower()
            if b"watch=true" in target or b"watch=1" in target:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                if pace:
                    await _send_paced(writer, chunks, pace)
                else:
                    for c in chunks:
                        writer.write(c)
                        await writer.drain()
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(_404), _404))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx, backlog=64)


def kubeconfig(url: str, ca_pem: bytes | None) -> dict[str, object]:
    import base64

    cluster: dict[str, object] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "replay",
        "clusters": [{"name": "replay", "cluster": cluster}],
        "users": [{"name": "replay", "user": {"token": "replay-token"}}],
        "contexts": [{"name": "replay", "context": {"cluster": "replay", "user": "replay",
                                                    "namespace": "watch"}}],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--body", required=True)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--tls", action="store_true")
    p.add_argument("--framing", choices=FRAMINGS, default="bulk")
    p.add_argument("--pace", type=float, help="events a second, one chunk each (a watch "
                   "that keeps up); --framing is then ignored")
    a = p.parse_args()
    body = Path(a.body).read_bytes()
    chunks = paced(body) if a.pace else framed(body, a.framing)
    ctx: ssl.SSLContext | None = None
    ca_pem: bytes | None = None
    if a.tls:
        import trustme

        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert.configure_cert(ctx)
        ca_pem = ca.cert_pem.bytes()

    def write_kubeconfig(port: int) -> None:
        import yaml

        scheme = "https" if ctx is not None else "http"
        url = f"{scheme}://127.0.0.1:{port}"
        Path(a.kubeconfig).write_text(yaml.safe_dump(kubeconfig(url, ca_pem)))

    async def run() -> None:
        server = await serve(chunks, ctx, a.pace)
        port = server.sockets[0].getsockname()[1]
        write_kubeconfig(port)
        print(f"READY {port}", flush=True)
        async with server:
            await server.serve_forever()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
