"""The knowledge base's remaining parameters (issue 30), through MCP over stdio and the
CLI: ``min_relevance``, ``metadata`` kept with a document, ``force_ocr`` and scanned PDFs read
by offline OCR, documents listed across contexts, and ``max_contexts``."""

from __future__ import annotations

import pytest

import json
import subprocess
import sys
from pathlib import Path

from knowledge_docs import make_image_pdf, make_markdown
from test_mcp_server import error_text, make_repo, mcp_session, server_env, structured

RETENTION = ["Invoice retention policy: keep invoices for", "ten years in the archive bucket."]


def cli(root: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), *args],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_a_scanned_pdf_is_read_by_ocr_and_found(tmp_path):
    root = make_repo(tmp_path / "repo")
    env = server_env(tmp_path / "run")
    scan = make_image_pdf(root / "docs" / "retention-scan.pdf", RETENTION)
    added = cli(root, env, "kb", "add", str(scan), "--json")
    assert added.returncode == 0, added.stderr
    report = json.loads(added.stdout)
    assert report["added"] == 1 and report["failed"] == 0
    found = json.loads(cli(root, env, "kb", "search", "how long are invoices kept",
                           "--json").stdout)
    top = found["hits"][0]
    assert top["document"].endswith("retention-scan.pdf") and top["page"] == 1
    assert "archive bucket" in top["snippet"]


@pytest.mark.slow
def test_force_ocr_metadata_listing_and_min_relevance_over_mcp(tmp_path):
    root = make_repo(tmp_path / "repo")
    env = server_env(tmp_path / "run")
    # A scanner left a useless text layer: only force_ocr reads what the page shows.
    scan = make_image_pdf(root / "docs" / "scan.pdf", RETENTION, text_layer="Scanned by MFP")
    notes = make_markdown(root / "docs" / "wifi.md", {
        "Office wifi": "The guest network password rotates every Monday."})
    with mcp_session(root, env, tmp_path / "serve.log", "knowledge") as agent:
        structured(agent.call("knowledge_context_create", {"name": "finance"}))
        plain = structured(agent.call("knowledge_add", {
            "paths": [str(scan)], "contexts": ["finance"]}))
        assert plain["added"] == 1
        query = {"query": "how many years are invoices kept in the archive", "k": 3}
        hits = structured(agent.call("knowledge_search", query))["hits"]
        assert not any("archive bucket" in h["snippet"] for h in hits)

        forced = structured(agent.call("knowledge_add", {
            "paths": [str(scan)], "contexts": ["finance"], "force_ocr": True,
            "metadata": {"team": "finance", "retention": "10y"}}))
        assert forced["updated"] == 1  # re-read although the file did not change
        structured(agent.call("knowledge_add", {"paths": [str(notes)],
                                                "metadata": {"team": "it"}}))
        hits = structured(agent.call("knowledge_search", query))["hits"]
        top = hits[0]
        assert "archive bucket" in top["snippet"]
        assert top["document_metadata"] == {"team": "finance", "retention": "10y"}

        # Unrelated documents are left out anyway; min_relevance cuts related ones too.
        both = {"query": "invoice archive retention and the guest wifi network", "k": 5}
        mixed = structured(agent.call("knowledge_search", both))["hits"]
        assert len(mixed) >= 2 and mixed[0]["score"] > mixed[-1]["score"], mixed
        cut = (mixed[0]["score"] + mixed[-1]["score"]) / 2
        strict = structured(agent.call("knowledge_search", {**both, "min_relevance": cut}))
        assert 0 < len(strict["hits"]) < len(mixed)
        assert all(h["score"] >= cut for h in strict["hits"])

        listed = structured(agent.call("knowledge_show", {}))  # every context
        by_doc = {Path(d["document"]).name: d for d in listed["documents"]}
        assert listed["total"] == 2 and set(by_doc) == {"scan.pdf", "wifi.md"}
        assert by_doc["scan.pdf"]["contexts"] == ["finance"]
        assert by_doc["wifi.md"]["contexts"] == ["default"]
        assert by_doc["wifi.md"]["metadata"] == {"team": "it"}
        only = structured(agent.call("knowledge_show", {"context": "finance", "limit": 5}))
        assert [Path(d["document"]).name for d in only["documents"]] == ["scan.pdf"]
        assert "unknown context" in error_text(agent.call("knowledge_show", {
            "context": "nope"}))
        assert "metadata" in error_text(agent.call("knowledge_add", {
            "paths": [str(notes)], "metadata": {"blob": "x" * 20_000}}))


def test_max_contexts_and_listing_on_the_cli(tmp_path):
    root = make_repo(tmp_path / "repo")
    (root / "context.toml").write_text("[knowledge]\nmax_contexts = 3\n")
    env = server_env(tmp_path / "run")
    for name in ("aws", "hipaa"):
        made = cli(root, env, "kb", "create", name)
        assert made.returncode == 0, made.stderr
    refused = cli(root, env, "kb", "create", "third")
    assert refused.returncode != 0
    assert "knowledge.max_contexts (3)" in refused.stderr
    notes = make_markdown(root / "notes.md", {"Deploys": "Blue green deploys on Fridays."})
    added = cli(root, env, "kb", "add", str(notes), "--context", "aws,hipaa",
                "--metadata", "owner=ops")
    assert added.returncode == 0, added.stderr
    docs = cli(root, env, "kb", "docs")
    assert docs.returncode == 0, docs.stderr
    assert "contexts: aws, hipaa" in docs.stdout and "'owner': 'ops'" in docs.stdout
