"""Inside the sandbox, before the agent: loopback listeners that lead to the harness's proxy.

    python -I forwarder.py PROXY_SOCKET PROXY_PORT FORWARD_PORTS -- AGENT ARGV...

The sandbox has no network; its one way out is the unix socket of the harness's proxy, bound
into it. This program (standard library only, run by the harness's interpreter) listens on
``127.0.0.1:PROXY_PORT`` and pipes every connection to that socket unchanged (the client speaks
the HTTP proxy protocol: ``HTTP(S)_PROXY`` point here), and on ``127.0.0.1:P`` for each port of
``FORWARD_PORTS`` (comma separated: declared loopback endpoints), where it opens a
``CONNECT 127.0.0.1:P`` tunnel first, so an unchanged base URL works. Then it runs the agent,
waits for it and exits with its status. It dies with the sandbox.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

_CHUNK = 65536


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(_CHUNK):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _join(client: socket.socket, upstream: socket.socket) -> None:
    threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
    threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()


def _tunnel(sock_path: str, port: int | None) -> socket.socket | None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(sock_path)
        if port is None:
            return up
        up.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            chunk = up.recv(1)
            if not chunk:
                break
            head += chunk
        if head.split(b" ", 2)[1:2] == [b"200"]:
            return up
    except OSError:
        pass
    up.close()
    return None


def _serve(listener: socket.socket, sock_path: str, port: int | None) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        up = _tunnel(sock_path, port)
        if up is None:
            client.close()
            continue
        _join(client, up)


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") != 3:
        sys.stderr.write("usage: forwarder.py PROXY_SOCKET PROXY_PORT FORWARD_PORTS -- ARGV...\n")
        return 2
    sock_path, proxy_port, ports = argv[0], int(argv[1]), [int(p) for p in argv[2].split(",") if p]
    command = argv[4:]
    for port, tunnel_port in [(proxy_port, None), *((p, p) for p in ports)]:
        listener = socket.create_server(("127.0.0.1", port), backlog=64)
        threading.Thread(target=_serve, args=(listener, sock_path, tunnel_port),
                         daemon=True).start()
    child = subprocess.Popen(command)
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
