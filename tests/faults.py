"""A scripted HTTP server on loopback for fault tests: request n (counted from 1) is answered by
``reply(path, body, n)``, which returns (status, JSON-able object or raw bytes), or ``DROP`` to
close the connection without a response, as a crashing server does."""
import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DROP = "drop"
MODELS = {"object": "list", "data": [{"id": "m", "object": "model"}]}  # GET /v1/models: the model "m"


@contextlib.contextmanager
def scripted(reply):
    """Yields the server's base URL (``http://127.0.0.1:<port>/v1``) and the list of requests it
    received, as (path, parsed body); GET /v1/models always lists the model "m"."""
    received, lock = [], threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: the tests read what was received instead
            pass

        def do_GET(self):
            self._send(200, MODELS if self.path.endswith("/models") else {"error": "no such route"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
            with lock:
                received.append((self.path, body))
                n = len(received)
            answer = reply(self.path, body, n)
            if answer == DROP:
                self.close_connection = True
                return
            self._send(*answer)

        def _send(self, status, payload):
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", received
    finally:
        server.shutdown()
        server.server_close()
