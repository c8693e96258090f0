"""``contextd related PATH:LINE`` (issue 39): the code most like a function, on a real project
indexed with the real model, through the CLI an agent or a person runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from contextd.query.related import Candidate, called_names, rank_related, shape_tokens
from test_mcp_server import make_repo, mcp_session, server_env, structured

ORDERS = '''"""Orders: totals, discounts and shipping."""

from shop.money import round_cents


def order_total(items, discount_rate=0.0):
    """Sum the price of every item times its quantity, less the discount."""
    subtotal = 0.0
    for item in items:
        if item.quantity <= 0:
            continue
        subtotal += item.unit_price * item.quantity
    discount = subtotal * discount_rate
    return round_cents(subtotal - discount)


def shipping_cost(weight_kg, zone):
    """Courier tariff by weight and destination zone."""
    base = {"domestic": 4.5, "europe": 9.0}.get(zone, 19.0)
    return round_cents(base + 1.2 * max(0.0, weight_kg - 1.0))
'''
# The near-copy: order_total with every name changed, in another package.
INVOICES = '''"""Invoices of the old billing system."""

from shop.money import round_cents


def invoice_amount(lines, rebate=0.0):
    """Invoice amount."""
    gross = 0.0
    for line in lines:
        if line.count <= 0:
            continue
        gross += line.price * line.count
    reduction = gross * rebate
    return round_cents(gross - reduction)


def invoice_header(invoice):
    return f"Invoice {invoice.number} to {invoice.client} on {invoice.date:%Y-%m-%d}"
'''
# Close in meaning and words to order_total (prices times quantities), not in shape.
MONEY = '''"""Money helpers."""

from decimal import ROUND_HALF_UP, Decimal


def round_cents(amount):
    """Round an amount to whole cents, half up."""
    return float(Decimal(str(amount)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def order_average_price(items):
    """The order's mean item price: unit price times quantity over the total quantity."""
    quantity = sum(item.quantity for item in items)
    if not quantity:
        return 0.0
    return round_cents(sum(item.unit_price * item.quantity for item in items) / quantity)
'''
PROJECT = {"shop/orders.py": ORDERS, "legacy/invoices.py": INVOICES, "shop/money.py": MONEY,
           # The command embeds itself: the vectors are there when it answers.
           "context.toml": "[owner]\nbackground = false\n"}


def contextd(root: Path, runtime: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, timeout=300,
                          env=server_env(runtime), stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("related")
    return make_repo(base / "shop", PROJECT), base / "run"


def test_the_near_copy_of_a_function_comes_first(shop):
    root, runtime = shop
    done = contextd(root, runtime, "--json", "related", "shop/orders.py:10", "-k", "3")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["target_label"], answer["target_lines"]) == ("order_total", [6, 14])
    first = answer["hits"][0]
    assert (first["file_path"], first["label"], first["why"]) == (
        "legacy/invoices.py", "invoice_amount", "near-copy"), answer["hits"]
    assert first["shape"] == 1.0 and first["meaning"] is not None, first
    assert answer["hits"][1]["label"] == "order_average_price"  # alike in meaning only
    assert first["score"] > answer["hits"][1]["score"]
    human = contextd(root, runtime, "related", "shop/orders.py:10", "-k", "1").stdout
    assert human.splitlines()[1].split()[1:4] == ["legacy/invoices.py:6-14", "invoice_amount",
                                                  "near-copy"], human


@pytest.mark.parametrize("location, message", [
    ("shop/orders.py", "give a file and a line"),
    ("shop/orders.py:400", "no indexed chunk holds that line"),
    ("shop/nowhere.py:3", "shop/nowhere.py is not indexed"),
])
def test_a_location_that_names_no_code_is_refused_in_one_line(shop, location, message):
    root, runtime = shop
    done = contextd(root, runtime, "related", location)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_shape_ignores_names_and_keeps_structure():
    renamed = "def f(a, b):\n    return g(a) + b * 2\n"
    original = "def total(items, rate):\n    return price(items) + rate * 7\n"
    assert shape_tokens(renamed) == shape_tokens(original)
    assert called_names(original) == {"price"}
    other = Candidate("2", "b.py", 1, 3, "h", "CODE_FUNCTION", "python",
                      "def h(x):\n    for y in x:\n        print(y)\n")
    copy = Candidate("1", "a.py", 1, 2, "f", "CODE_FUNCTION", "python", renamed)
    target = Candidate("0", "c.py", 1, 2, "total", "CODE_FUNCTION", "python", original)
    hits = rank_related(target, [other, copy], vectors={}, k=5)
    assert [hit.label for hit in hits] == ["f", "h"] and hits[0].why == "near-copy"
    assert hits[0].meaning is None  # no vectors: ranked on shape and calls


@pytest.mark.slow
def test_find_related_over_mcp_is_the_related_group(shop, tmp_path):
    root, runtime = shop
    with mcp_session(root, server_env(runtime), tmp_path / "server.log", "related") as agent:
        answer = structured(agent.call("find_related", {"path": "./shop/orders.py",
                                                        "line": 7, "k": 2}))
    assert answer["hits"][0]["label"] == "invoice_amount", answer
