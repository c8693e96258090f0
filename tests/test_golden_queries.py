"""Golden queries on tests/fixtures/golden_repo, written before any tuning of the providers.

Each names the file (and, where it matters, the symbol or heading) a developer would expect among
the first three results. They all run through the hybrid provider with the real embedding model;
benchmarks/bench_retrieval.py prints each single provider's pass rate on the same list.
"""

from __future__ import annotations

import pytest

from contextd.query.records import QueryRequest

# (query, expected file, expected label suffix or None for "any chunk of the file")
GOLDEN_QUERIES = [
    ("where are JWT tokens validated", "src/shoptrack/auth.py", "validate_token"),
    ("token bucket rate limiting", "src/shoptrack/ratelimit.py", "RateLimiter"),
    ("RateLimiter.allow", "src/shoptrack/ratelimit.py", "allow"),
    ("how is the order total computed with discounts", "src/shoptrack/orders.py",
     "calculate_total"),
    ("cancel an order and refund the payment", "src/shoptrack/orders.py", "cancel_order"),
    ("exponential backoff when the database connection fails", "src/shoptrack/db.py",
     "connect_with_retry"),
    ("run_migrations", "src/shoptrack/db.py", "run_migrations"),
    ("evict expired entries from the cache", "src/shoptrack/cache.py", "evict_expired"),
    ("idempotency key when charging a card", "src/shoptrack/payments.py", "charge"),
    ("fetchWithRetry", "web/src/api.ts", "fetchWithRetry"),
    ("add a product to the shopping cart", "web/src/cart.ts", "addItem"),
    ("how do I deploy the service to production", "docs/deployment.md", None),
    ("database connection pool size and timeout settings", "config/settings.yaml", None),
    ("hash a password for storage", "src/shoptrack/auth.py", "hash_password"),
    ("orders table schema", "migrations/001_orders.sql", None),
    ("parse the error message of a failed API response", "web/src/api.ts", "parseApiError"),
    ("`LRUCache`", "src/shoptrack/cache.py", "LRUCache"),
    ("refresh an expired access token", "src/shoptrack/auth.py", "refresh_token"),
]

TOP_N = 3


def golden_hit(hits, path: str, label: str | None) -> bool:
    """True when one of the first TOP_N hits is the expected file (and symbol)."""
    for hit in hits[:TOP_N]:
        if hit.file_path == path and (label is None or hit.label.endswith(label)):
            return True
    return False


@pytest.mark.parametrize("query,path,label", GOLDEN_QUERIES,
                         ids=[q for q, _, _ in GOLDEN_QUERIES])
def test_golden_query_in_top3(golden_module, query, path, label):
    response = golden_module.query(QueryRequest(query=query, k=8))
    shown = [(h.file_path, h.label, round(h.score, 3)) for h in response.hits[:TOP_N]]
    assert golden_hit(response.hits, path, label), f"{query!r}: top {TOP_N} were {shown}"
