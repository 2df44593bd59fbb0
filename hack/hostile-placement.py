#!/usr/bin/env python3
"""A Placement that answers one list with an answer far larger than any real one, for
measuring what `kubeplace placement import` and `export` hold while such an answer arrives
(peak resident memory, and whether they stop with a clear error).

Every other request gets the answer of an empty Placement 16 at 1.39 (no resource classes,
traits or providers). The hostile answer is valid JSON: the list of --path (its key is the
path's last part), its entries repeated until the body has --bytes bytes. It is sent with a
Content-Length, or with `--chunk N` in chunks of N bytes (`--chunk 1` drips it one byte a
chunk), or with `--no-length` undeclared, ended by closing the connection.

    python3 hack/hostile-placement.py --bytes 52428800 [--path /resource_providers]
        [--chunk 1 | --no-length] [--port P]

Prints `listening on http://127.0.0.1:PORT`, then serves until killed.
"""
import argparse
import socket
import socketserver
import sys

ENTRIES = {
    "resource_classes": b'{"name":"VCPU","links":[{"rel":"self","href":"/resource_classes/VCPU"}]}',
    "traits": b'"HW_CPU_X86_AVX2"',
    "resource_providers": (
        b'{"uuid":"a0000000-0000-4000-8000-000000000001","name":"cn1","generation":1,'
        b'"parent_provider_uuid":null,"root_provider_uuid":"a0000000-0000-4000-8000-000000000001",'
        b'"links":[]}'
    ),
}
EMPTY = {
    "/resource_classes": b'{"resource_classes": []}',
    "/traits": b'{"traits": []}',
    "/resource_providers": b'{"resource_providers": []}',
}
# The wire bytes of this many entries are made once and sent again and again.
BLOCK_ENTRIES = 4096


def hostile_parts(key, size, chunk):
    """The body's wire bytes in parts: `{"KEY": [E,E,...,E]}` of `size` bytes (padded with
    spaces before the closing brackets), each part chunk-encoded when `chunk` is set."""
    head = b'{"%s": [' % key.encode()
    tail = b"]}"
    entry = ENTRIES[key]
    unit = entry + b","
    room = size - len(head) - len(tail) - len(entry)
    count = max(room // len(unit), 0)
    pad = b" " * max(room - count * len(unit), 0)

    def wire(data):
        if not chunk:
            return data
        out = bytearray()
        for i in range(0, len(data), chunk):
            piece = data[i : i + chunk]
            out += b"%x\r\n" % len(piece) + piece + b"\r\n"
        return bytes(out)

    yield wire(head)
    block = wire(unit * BLOCK_ENTRIES)
    whole, rest = divmod(count, BLOCK_ENTRIES)
    for _ in range(whole):
        yield block
    yield wire(unit * rest + entry + pad + tail)
    if chunk:
        yield b"0\r\n\r\n"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while True:
            line = self.rfile.readline()
            if not line:
                return
            length = 0
            while True:
                header = self.rfile.readline()
                if header in (b"\r\n", b"\n", b""):
                    break
                name, _, value = header.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            self.rfile.read(length)
            path = line.split()[1].decode().split("?")[0]
            if path == ARGS.path:
                self.send_hostile()
                return
            body = EMPTY.get(path, b'{"errors": [{"status": 404, "detail": "not here"}]}')
            status = b"200 OK" if path in EMPTY else b"404 Not Found"
            self.wfile.write(
                b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % (status, len(body))
                + body
            )
            self.wfile.flush()

    def send_hostile(self):
        key = ARGS.path.rsplit("/", 1)[-1]
        if ARGS.chunk:
            framing = b"Transfer-Encoding: chunked\r\n"
        elif ARGS.no_length:
            framing = b"Connection: close\r\n"
        else:
            framing = b"Content-Length: %d\r\n" % ARGS.bytes
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + framing + b"\r\n")
            for part in hostile_parts(key, ARGS.bytes, ARGS.chunk):
                self.wfile.write(part)
            self.wfile.flush()
        except OSError:
            # The client stopped reading: what it should do.
            pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--path", default="/resource_classes", choices=sorted(EMPTY))
    parser.add_argument("--chunk", type=int, default=0)
    parser.add_argument("--no-length", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    ARGS = parser.parse_args()
    server = Server(("127.0.0.1", ARGS.port), Handler)
    server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
