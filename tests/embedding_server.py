"""A real embedding server for tests and benchmarks: OpenAI's ``/v1/embeddings`` and Ollama's
``/api/embed`` over HTTP/1.1 keep-alive, serving vectors from contextd's own ONNX embedder (so
results can be compared with the local backend), with faults injected on demand.

This is test infrastructure, not part of the product: the faults (429 with Retry-After, 500,
a stalled answer, a connection dropped mid-body) are what a real server or network does to
a client, and the client under test must survive them.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import numpy as np

OPENAI_PATH = "/v1/embeddings"
OLLAMA_PATH = "/api/embed"

# Fault names: what the next requests suffer, one fault per request, in order.
RATE_LIMITED = "429"          # 429 with Retry-After: 1
SERVER_ERROR = "500"
STALL = "stall"               # answer only after `stall_s` (longer than the client's timeout)
DROP = "drop"                 # headers and half the body, then the connection is closed


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout) leaves a broken pipe behind: expected here."""


class EmbeddingServer:
    """Serves ``embed(texts) -> ndarray`` under ``model``; ``api_key`` (if set) is required
    as a Bearer token. ``transform`` post-processes vectors (another dimension, another
    space). Counts every text it embedded successfully in ``served``."""

    def __init__(self, embed: Callable[[list[str]], np.ndarray], model: str,
                 api_key: str | None = None, stall_s: float = 3.0):
        self.embed = embed
        self.model = model
        self.api_key = api_key
        self.stall_s = stall_s
        self.transform: Callable[[np.ndarray], np.ndarray] = lambda v: v
        self.faults: collections.deque[str] = collections.deque()
        self.served: collections.Counter[str] = collections.Counter()
        self.requests = 0
        self.faults_served = 0
        self.batch_sizes: list[int] = []
        self.lock = threading.Lock()
        self.model_lock = threading.Lock()
        self.httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "EmbeddingServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            self.served.clear()
            self.requests = self.faults_served = 0
            self.batch_sizes.clear()
        self.transform = lambda v: v

    def next_fault(self) -> str | None:
        with self.lock:
            self.requests += 1
            if self.faults:
                self.faults_served += 1
                return self.faults.popleft()
            return None


def _handler_for(server: EmbeddingServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        disable_nagle_algorithm = True  # as real servers do: no 40 ms delayed-ACK stalls

        def log_message(self, *args: Any) -> None:  # quiet: tests read the counters
            pass

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None,
                  drop_after: int | None = None) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if drop_after is not None:
                self.wfile.write(body[:drop_after])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            ollama = self.path == OLLAMA_PATH
            if self.path not in (OPENAI_PATH, OLLAMA_PATH):
                return self._send(404, {"error": f"no route {self.path}"})
            if server.api_key and self.headers.get("Authorization") != \
                    f"Bearer {server.api_key}":
                return self._send(401, {"error": {"message": "Incorrect API key provided",
                                                  "type": "invalid_request_error"}})
            if request.get("model") != server.model:
                message = (f'model "{request.get("model")}" not found, try pulling it first'
                           if ollama else f"The model `{request.get('model')}` does not exist")
                return self._send(404, {"error": message if ollama else {"message": message}})
            texts = request["input"] if isinstance(request["input"], list) \
                else [request["input"]]
            fault = server.next_fault()
            if fault == RATE_LIMITED:
                return self._send(429, {"error": {"message": "Rate limit reached"}},
                                  {"Retry-After": "1"})
            if fault == SERVER_ERROR:
                return self._send(500, {"error": {"message": "CUDA out of memory"}})
            if fault == STALL:
                time.sleep(server.stall_s)
            with server.model_lock:  # one model, one queue: as TEI or Ollama run it
                vectors = server.transform(server.embed(texts))
            tokens = sum(len(t.split()) for t in texts)
            if ollama:
                payload = {"model": server.model, "embeddings": vectors.tolist(),
                           "prompt_eval_count": tokens}
            else:
                # Reversed order with explicit indices, as the protocol allows.
                payload = {"object": "list", "model": server.model,
                           "data": [{"object": "embedding", "index": i, "embedding": v}
                                    for i, v in reversed(list(enumerate(vectors.tolist())))],
                           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
            if fault == DROP:
                return self._send(200, payload, drop_after=64)
            if fault != STALL:
                with server.lock:
                    server.served.update(texts)
                    server.batch_sizes.append(len(texts))
            self._send(200, payload)

    return Handler


def main() -> None:
    """Serve from a separate process (the benchmark's server, so that client and server do not
    share one interpreter lock): prints the base URL, then serves until killed.

        python tests/embedding_server.py [--model NAME] [--fake]

    ``--fake`` answers constant vectors without running a model: what is left of a request's
    time is the protocol's own overhead (HTTP, JSON both ways)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--fake", action="store_true")
    args = parser.parse_args()
    if args.fake:
        def embed(texts: list[str]) -> np.ndarray:
            vectors = np.zeros((len(texts), 384), dtype=np.float32)
            vectors[:, 0] = 1.0
            return vectors
    else:
        from contextd.config.sections import EmbeddingConfig
        from contextd.embedders.registry import get_embedder

        embed = get_embedder(EmbeddingConfig()).embed
        embed(["warm up"])
    server = EmbeddingServer(embed, args.model).start()
    sys.stdout.write(server.base_url + "\n")
    sys.stdout.flush()
    server.thread.join()


if __name__ == "__main__":
    main()
