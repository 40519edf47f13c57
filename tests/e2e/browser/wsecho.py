"""A tiny WebSocket echo server for the tests (RFC 6455, text frames, no extensions): every
handshake it accepts is logged, so a test can prove a refused WebSocket never connected."""
import base64
import hashlib
import socket
import struct
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class EchoServer:
    def __init__(self, host="127.0.0.1"):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.host = host
        self.handshakes = []  # request paths
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path="/echo"):
        return "ws://%s:%d%s" % (self.host, self.port, path)

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            c.settimeout(10)
            data = b""
            while b"\r\n\r\n" not in data:
                got = c.recv(4096)
                if not got:
                    return
                data += got
            lines = data.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
            key = headers.get("sec-websocket-key")
            if not key:
                c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            self.handshakes.append(path)
            accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: %s\r\n\r\n" % accept).encode())
            buf = b""
            while True:
                while len(buf) < 2:
                    got = c.recv(4096)
                    if not got:
                        return
                    buf += got
                op, n = buf[0] & 0x0F, buf[1] & 0x7F
                pos = 2
                if n == 126:
                    n, pos = struct.unpack(">H", buf[2:4])[0], 4
                elif n == 127:
                    n, pos = struct.unpack(">Q", buf[2:10])[0], 10
                while len(buf) < pos + 4 + n:
                    got = c.recv(4096)
                    if not got:
                        return
                    buf += got
                mask, payload = buf[pos:pos + 4], bytearray(buf[pos + 4:pos + 4 + n])
                buf = buf[pos + 4 + n:]
                for i in range(n):
                    payload[i] ^= mask[i % 4]
                if op == 8:
                    c.sendall(b"\x88\x00")
                    return
                if op == 1:
                    head = bytes([0x81, n]) if n < 126 else bytes([0x81, 126]) + struct.pack(">H", n)
                    c.sendall(head + bytes(payload))
        except OSError:
            pass
        finally:
            c.close()

    def stop(self):
        self.stopped = True
        self.sock.close()
