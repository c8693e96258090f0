"""The standalone context service (docs/SERVICE.md): ``contextd server``.

* :mod:`contextd.http.api` — request models of the JSON API and its OpenAPI document;
* :mod:`contextd.http.app` — the endpoints, on one Starlette app with the MCP endpoint;
* :mod:`contextd.http.guard` — API keys, scopes, rate and size limits, JSON errors;
* :mod:`contextd.http.keys` — the hashed API keys (``contextd keys``);
* :mod:`contextd.http.runner` — listening policy, TLS and the uvicorn run;
* :mod:`contextd.api.remote` — ``ContextModule.open(mode=...)``: standalone and hybrid.

The Python client is :mod:`contextd.runtime.service_client`.
"""
