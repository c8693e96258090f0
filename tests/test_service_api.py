"""The standalone service (``contextd server``) driven over real HTTP: every endpoint, good
and bad requests, API keys and scopes, rate and size limits, the listening policy, the MCP
endpoint on the same server, and the Python client across a SIGKILLed service."""

from __future__ import annotations

import concurrent.futures
import json
import signal
import threading
import time

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from contextd.runtime.service_client import ServiceClient, ServiceError
from service_helpers import (Server, cli, create_key, env_for, free_port, make_project,
                             running_server)


@pytest.fixture(scope="module")
def open_server(tmp_path_factory):
    """A server on loopback with no keys, a small body limit and no rate limit."""
    with running_server(tmp_path_factory.mktemp("svc"),
                        "[engine]\nmax_body_mb = 0.01\nrate_limit_per_s = 0\n") as server:
        yield server


def post(server: Server, path: str, body, key: str | None = None, **kwargs):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx2.post(server.url + path, content=data, timeout=60,
                       headers={"content-type": "application/json", **headers,
                                **kwargs.pop("headers", {})}, **kwargs)


def test_query_stats_health_and_openapi(open_server) -> None:
    assert httpx2.get(open_server.url + "/healthz").json() == {"status": "ok"}
    ready = httpx2.get(open_server.url + "/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    answer = post(open_server, "/query_context",
                  {"q": "refresh an expired JWT token", "k": 3, "mmr_lambda": 0.9,
                   "budget": 400, "filters": {"lang": "python"}}).json()
    assert answer["hits"][0]["file_path"] == "auth/tokens.py"
    assert answer["q_embed_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert answer["total"] == len(answer["hits"]) and answer["total_tokens"] <= 400
    assert {h["language"] for h in answer["hits"]} == {"python"}
    scoped = post(open_server, "/query_context",
                  {"q": "snapshots", "filters": {"path_glob": ["docs/*"]}}).json()
    assert scoped["hits"] and {h["file_path"] for h in scoped["hits"]} == {"docs/backup.md"}
    stats = httpx2.get(open_server.url + "/stats").json()
    # The three files and context.toml.
    assert stats["storage"]["total_files"] == 4 and stats["owner"]["this_process"] is True
    schema = httpx2.get(open_server.url + "/openapi.json").json()
    assert {"/add_context", "/delete_context", "/query_context", "/stats"} <= set(schema["paths"])
    assert "additionalProperties" in json.dumps(
        schema["components"]["schemas"]["QueryContextRequest"])


def test_add_and_delete_context(open_server) -> None:
    added = post(open_server, "/add_context", {
        "file_path": "notes/zebra.md", "lang": "markdown", "mime": "text/markdown",
        "content": "# Zebra handshake\n\nThe zebra protocol opens with a striped hello.\n"})
    assert added.status_code == 200, added.text
    body = added.json()
    assert body["indexed"] and body["chunks"] >= 1 and body["language"] == "markdown"
    hits = post(open_server, "/query_context", {"q": "zebra striped hello"}).json()["hits"]
    assert hits[0]["file_path"] == "notes/zebra.md"
    # Pushed content for a file that exists on disk is what gets indexed (until it changes).
    pushed = post(open_server, "/add_context", {
        "file_path": "billing/invoice.py", "lang": "rust",
        "content": "def quokka_ledger():\n    return 1\n"}).json()
    assert pushed["language"] == "python" and "lang 'rust' ignored" in pushed["notes"][0]
    hits = post(open_server, "/query_context", {"q": "quokka_ledger"}).json()["hits"]
    assert hits and hits[0]["file_path"] == "billing/invoice.py"
    assert "quokka_ledger" in hits[0]["snippet"]
    # Without content: the file is read from disk again.
    restored = post(open_server, "/add_context", {"file_path": "billing/invoice.py"}).json()
    assert restored["indexed"]
    hits = post(open_server, "/query_context", {"q": "quokka_ledger"}).json()["hits"]
    assert not any("quokka_ledger" in h["snippet"] for h in hits)
    gone = post(open_server, "/delete_context", {"file_path": "notes/zebra.md"}).json()
    assert gone == {"file_path": "notes/zebra.md", "deleted": True}
    assert post(open_server, "/delete_context",
                {"file_path": "notes/zebra.md"}).json()["deleted"] is False
    hits = post(open_server, "/query_context", {"q": "zebra striped hello"}).json()["hits"]
    assert all(h["file_path"] != "notes/zebra.md" for h in hits)


@pytest.mark.parametrize("path, body, status, code", [
    ("/query_context", b'{"q": "x",', 400, "malformed_json"),
    ("/query_context", b'["q"]', 400, "malformed_json"),
    ("/query_context", {"q": "x", "top_k": 3}, 400, "invalid_request"),
    ("/query_context", {"q": "x", "filters": {"language": "py"}}, 400, "invalid_request"),
    ("/query_context", {"q": ""}, 400, "invalid_request"),
    ("/query_context", {"q": "x", "k": 0}, 400, "invalid_request"),
    ("/query_context", {"q": "x", "model": "other/model"}, 400, "model_mismatch"),
    ("/add_context", {"content": "no path"}, 400, "invalid_request"),
    ("/add_context", {"file_path": "../outside.py", "content": "x"}, 400, "bad_request"),
    ("/add_context", {"file_path": "node_modules/x.js", "content": "x"}, 400, "bad_request"),
    ("/add_context", {"file_path": "big.md", "content": "x" * 20000}, 413, "body_too_large"),
    ("/nowhere", {}, 404, "not_found"),
])
def test_bad_requests_get_structured_errors(open_server, path, body, status, code) -> None:
    response = post(open_server, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    if code == "invalid_request":
        assert error["details"][0]["field"]


def test_wrong_method_and_media_type(open_server) -> None:
    response = httpx2.get(open_server.url + "/query_context")
    assert response.status_code == 405 and response.json()["error"]["code"] == \
        "method_not_allowed"
    response = httpx2.post(open_server.url + "/query_context", content=b"q=x",
                           headers={"content-type": "application/x-www-form-urlencoded"})
    assert response.status_code == 415 and response.json()["error"]["code"] == \
        "unsupported_media_type"
    # A body without Content-Length is counted as it arrives.
    chunks = iter([b'{"q": "', b"y" * 20000, b'"}'])
    response = httpx2.post(open_server.url + "/query_context", content=chunks,
                           headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_mcp_endpoint_on_the_same_server(open_server) -> None:
    import anyio

    async def run():
        async with streamable_http_client(open_server.url + "/mcp") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {t.name for t in (await session.list_tools()).tools}
                result = await session.call_tool("query_context", {"query": "invoice totals"})
                return tools, result

    tools, result = anyio.run(run)
    assert "query_context" in tools and not result.is_error
    assert "billing/invoice.py" in json.dumps(result.structured_content)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("keyed")
    root = make_project(base / "proj", "[engine]\nrate_limit_per_s = 2\nrate_limit_burst = 5\n")
    env = env_for(base / "run")
    keys = {name: create_key(root, env, name, scope)
            for name, scope in (("reader", "read"), ("writer", "write"), ("spare", "read"),
                                ("burst", "read"))}
    server = Server(root, env, key=keys["writer"]).start()
    try:
        yield server.wait_indexed(), keys
    finally:
        server.stop()


@pytest.mark.slow
def test_keys_scopes_and_revocation(keyed_server) -> None:
    server, keys = keyed_server
    query = {"q": "invoice totals"}
    missing = post(server, "/query_context", query)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "missing_key"
    assert missing.headers["www-authenticate"] == "Bearer"
    wrong = post(server, "/query_context", query, key=keys["reader"][:-4] + "AAAA")
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_key"
    assert post(server, "/query_context", query, key="not-a-key").status_code == 401
    assert post(server, "/query_context", query, key=keys["reader"]).status_code == 200
    refused = post(server, "/add_context", {"file_path": "a.md", "content": "# a\n"},
                   key=keys["reader"])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    assert post(server, "/add_context", {"file_path": "a.md", "content": "# a\n"},
                key=keys["writer"]).status_code == 200
    assert httpx2.get(server.url + "/healthz").status_code == 200  # public
    # Keys are stored hashed; the plaintext is nowhere on disk.
    listing = json.loads(cli(server.root, server.env, "--json", "keys", "list").stdout)
    assert {k["name"] for k in listing} == set(keys) and "sha256" not in listing[0]
    stored = (server.root / ".contextd" / "api_keys.json").read_text()
    assert all(plain not in stored for plain in keys.values())
    # Revocation takes effect on the running service.
    assert post(server, "/query_context", query, key=keys["spare"]).status_code == 200
    spare_id = keys["spare"].split("_")[1]
    assert cli(server.root, server.env, "keys", "revoke", spare_id).returncode == 0
    assert post(server, "/query_context", query, key=keys["spare"]).status_code == 401


def test_rate_limit_per_key(keyed_server) -> None:
    server, keys = keyed_server
    statuses = [httpx2.get(server.url + "/openapi.json").status_code]  # public: not limited

    def stats(_: int) -> int:
        return httpx2.get(server.url + "/stats", timeout=60, headers={
            "Authorization": f"Bearer {keys['burst']}"}).status_code

    # All at once: sent one by one, on a loaded machine each answer can take longer than
    # the bucket needs to refill (2/s), and no request is ever over the limit.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses += pool.map(stats, range(8))
    assert 429 in statuses and statuses.count(200) >= 5
    limited = httpx2.get(server.url + "/stats",
                         headers={"Authorization": f"Bearer {keys['burst']}"})
    if limited.status_code == 429:
        assert int(limited.headers["retry-after"]) >= 1
    # Another key has its own bucket.
    assert httpx2.get(server.url + "/stats", timeout=60, headers={
        "Authorization": f"Bearer {keys['reader']}"}).status_code == 200


def test_non_loopback_needs_keys(tmp_path) -> None:
    root = make_project(tmp_path / "proj")
    env = env_for(tmp_path / "run")
    done = cli(root, env, "server", "--host", "0.0.0.0", "--port", str(free_port()))
    assert done.returncode == 1
    assert "without API keys" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_client_retries_across_a_killed_service(tmp_path) -> None:
    root = make_project(tmp_path / "proj", "[engine]\nrate_limit_per_s = 0\n")
    env = env_for(tmp_path / "run")
    server = Server(root, env).start().wait_indexed()
    client = ServiceClient(server.url, timeout_s=60, retries=40, backoff_s=0.25)
    try:
        before = client.query_context("refresh an expired JWT token", k=3)
        server.stop(signal.SIGKILL)
        restarted = Server(root, env, port=server.port)
        threading.Timer(1.0, restarted.start).start()
        started = time.monotonic()
        after = client.query_context("refresh an expired JWT token", k=3)
        assert time.monotonic() - started > 0.9  # it did wait for the new process
        assert [h["file_path"] for h in after["hits"]][:1] == \
            [h["file_path"] for h in before["hits"]][:1]
        with pytest.raises(ServiceError) as refused:
            client.query_context("x", k=1000)
        assert refused.value.status == 400 and "k" in str(refused.value)
    finally:
        client.close()
        if "restarted" in locals():
            while restarted.proc is None:
                time.sleep(0.1)
            assert restarted.stop() == 0
    unreachable = ServiceClient(f"http://127.0.0.1:{free_port()}", retries=1, backoff_s=0.01)
    with pytest.raises(ServiceError, match="unreachable.*after 2 attempt"):
        unreachable.stats()


def _self_signed(folder) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def test_tls_from_config(tmp_path) -> None:
    import ssl

    cert, key = _self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=cert)
    root = make_project(tmp_path / "proj", f'[engine]\ntls_cert = "{cert}"\ntls_key = "{key}"\n')
    server = Server(root, env_for(tmp_path / "run")).start()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                health = httpx2.get(f"https://127.0.0.1:{server.port}/healthz", verify=trust)
                break
            except httpx2.ConnectError:
                assert time.monotonic() < deadline and server.proc.poll() is None
                time.sleep(0.3)
        assert health.json() == {"status": "ok"}
        with pytest.raises(httpx2.HTTPError):  # plain HTTP is not served
            httpx2.get(f"http://127.0.0.1:{server.port}/healthz")
    finally:
        assert server.stop() == 0
