"""The DEPENDENCY provider (issue 30): declared dependencies from real manifests, and the code
importing and using them, through the CLI, the Python module and the manifest parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextd.providers.manifests import parse_manifest

REPO = Path(__file__).resolve().parent.parent

FILES = {
    "context.toml": '[contextualizer]\nstrategy = "none"\n',
    "pyproject.toml": '[project]\nname = "shop"\nversion = "1.0"\ndependencies = [\n'
                      '    "requests>=2.31",\n    "PyYAML>=6.0",\n]\n\n'
                      '[project.optional-dependencies]\ndev = ["pytest>=8"]\n',
    "shop/client.py": 'import requests\n\n\ndef fetch_catalog(url):\n'
                      '    """Download the product catalog."""\n'
                      '    response = requests.get(url, timeout=5)\n'
                      '    response.raise_for_status()\n    return response.json()\n\n\n'
                      'def ping(url):\n    """Check the shop answers."""\n'
                      '    return requests.head(url).ok\n',
    "shop/settings.py": 'from yaml import safe_load\n\n\ndef load_settings(path):\n'
                        '    """Read the shop settings file."""\n'
                        '    with open(path) as fh:\n        return safe_load(fh)\n',
    "shop/prices.py": 'def total(items):\n    """Sum the prices."""\n'
                      '    return sum(i.price for i in items)\n',
    "web/package.json": json.dumps({"name": "web", "dependencies": {"express": "^4.19.0"},
                                    "devDependencies": {"lodash": "4.17.21"}}, indent=2),
    "web/server.ts": "import express from 'express';\nconst _ = require('lodash');\n\n"
                     "export function startServer(port: number) {\n"
                     "  const app = express();\n"
                     "  app.get('/', (req, res) => res.send(_.capitalize('hello')));\n"
                     "  return app.listen(port);\n}\n",
}


def contextd(root: Path, *args: str) -> dict:
    env = dict(os.environ, CONTEXTD_LOAD_PLUGINS="", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "contextd", "--root", str(root), "--json",
                           *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=env, cwd=root, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("deps") / "shop"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    contextd(root, "refresh")
    return root


def dependency_hits(root: Path, text: str) -> list[dict]:
    return contextd(root, "query", text, "--provider", "dependency", "--k", "10",
                    "--budget", "4000")["hits"]


def test_a_named_dependency_gives_its_declaration_importers_and_users(root):
    hits = dependency_hits(root, "how do we call requests")
    relations = [(h["file_path"], h["label"], h["metadata"]["relation"]) for h in hits]
    assert relations[0][0] == "pyproject.toml" and relations[0][2] == "declares"
    assert hits[0]["metadata"]["version"] == "requests>=2.31"
    assert hits[0]["metadata"]["group"] == "runtime"
    assert ("shop/client.py", "imports", "imports") in relations
    users = [label for path, label, rel in relations if rel == "uses"]
    assert set(users) == {"fetch_catalog", "ping"}
    assert all(h["file_path"] != "shop/prices.py" for h in hits)


def test_a_distribution_is_found_by_its_import_name(root):
    hits = dependency_hits(root, "where is yaml parsed")
    assert hits[0]["metadata"]["dependency"] == "PyYAML"
    assert [h["label"] for h in hits if h["metadata"]["relation"] == "uses"] == \
        ["load_settings"]


def test_npm_imports_and_requires(root):
    hits = dependency_hits(root, "upgrade lodash")
    assert hits[0]["file_path"] == "web/package.json"
    assert hits[0]["metadata"]["group"] == "dev"
    assert {h["file_path"] for h in hits[1:]} == {"web/server.ts"}
    assert "uses" in {h["metadata"]["relation"] for h in hits}


def test_a_general_question_lists_the_manifests(root):
    hits = dependency_hits(root, "which libraries does the shop depend on")
    assert {h["file_path"] for h in hits} == {"pyproject.toml", "web/package.json"}
    assert dependency_hits(root, "how are prices summed") == []


def test_the_default_query_fuses_the_dependency_provider(root):
    answer = contextd(root, "query", "requests", "--k", "5")
    found = {h["file_path"]: h["providers"] for h in answer["hits"]}
    assert "dependency" in found["pyproject.toml"]
    stats = contextd(root, "stats")
    provider = next(p for p in stats["providers"] if p["id"] == "dependency")
    assert provider["type"] == "DEPENDENCY" and provider["available"] is True
    assert provider["stats"]["declared"] == 5


def test_python_module_sees_dependency_metadata(root):
    from contextd import ContextModule
    from contextd.query.records import QueryRequest

    module = ContextModule.open(str(root))
    try:
        response = module.query(QueryRequest("express server", providers=("dependency",)))
        assert response.hits[0].metadata["dependency"] == "express"
        assert any(h.label == "startServer" for h in response.hits)
    finally:
        module.shutdown()


def test_manifest_parsers():
    gomod = ("module example.com/shop\n\ngo 1.22\n\nrequire (\n"
             "\tgithub.com/gorilla/mux v1.8.1\n\tgolang.org/x/text v0.14.0 // indirect\n)\n"
             "require github.com/lib/pq v1.10.9\n")
    found = [(d.name, d.spec, d.line, d.group) for d in parse_manifest("go.mod", gomod)]
    assert found == [("github.com/gorilla/mux", "v1.8.1", 6, "runtime"),
                     ("golang.org/x/text", "v0.14.0", 7, "indirect"),
                     ("github.com/lib/pq", "v1.10.9", 9, "runtime")]
    cargo = '[dependencies]\nserde = { version = "1.0", features = ["derive"] }\n' \
            'tokio = "1"\n[dev-dependencies]\ninsta = "1.34"\n'
    assert [(d.name, d.spec, d.group) for d in parse_manifest("Cargo.toml", cargo)] == [
        ("serde", "1.0", "runtime"), ("tokio", "1", "runtime"), ("insta", "1.34", "dev")]
    poetry = '[tool.poetry.dependencies]\npython = "^3.11"\nhttpx = "^0.27"\n'
    assert [d.name for d in parse_manifest("pyproject.toml", poetry)] == ["httpx"]
    reqs = "# pinned\nDjango==5.0.1  # web\n-r base.txt\npsycopg[binary]>=3\n"
    assert [(d.name, d.line) for d in parse_manifest("requirements.txt", reqs)] == [
        ("Django", 2), ("psycopg", 4)]
    assert parse_manifest("package.json", "{not json") == []


def test_a_dependency_named_in_passing_weighs_by_its_share_of_the_query(root):
    """A question whose subject is something else ("the prices", "the catalog") and that
    names a package in passing must not get the package's declaration and importers first:
    the provider's fusion weight is scaled by the share of the query it recognises."""
    from contextd import ContextModule
    from contextd.providers.base import ProviderQuery

    module = ContextModule.open(str(root))
    try:
        provider = module.pipeline.provider("dependency")
        assert provider.query_share(ProviderQuery("requests")) == 1.0
        assert provider.query_share(ProviderQuery("where is PyYAML used")) == 1.0
        assert provider.query_share(ProviderQuery("which libraries does the shop depend on")) \
            == 2 / 3
        passing = "how are the item prices summed into a total for requests"
        assert provider.query_share(ProviderQuery(passing)) == 1 / 5
        assert provider.query_share(ProviderQuery("how are prices summed")) == 0.0
    finally:
        module.shutdown()
    answer = contextd(root, "query", passing, "--k", "3")
    assert answer["hits"][0]["file_path"] == "shop/prices.py"
