"""Agent memory in process: the real model, a real DuckDB file, an injected clock.

The scenario of the issue (stash a traceback and a decision, work on, retrieve them with a
paraphrase a day later, merge them), then expiry and protection, duplicates, reference
chains, session isolation, bad input that writes nothing, the size cap, a model change, and
memory inside query_context when the scope asks for it.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta

import pytest

from contextd.config.sections import EmbeddingConfig, StashConfig
from contextd.embedders import onnx_factory
from contextd.runtime.engine import Engine
from contextd.errors import StashFullError, UsageError
from contextd.hookspecs import hookimpl
from secrets_corpus import ISSUE_28_SECRETS, ISSUE_28_TRACE
from contextd.plugins.manager import get_plugin_manager
from contextd.config.project import Project
from contextd.query.records import QueryRequest
from contextd.records import ContextScope
from contextd.stash.model import RetrieveRequest, SegmentInput, StashRequest

T0 = datetime(2026, 11, 2, 9, 30)

TRACEBACK = '''Traceback (most recent call last):
  File "app/api/orders.py", line 88, in create_order
    total = pricing.total(cart, customer.tier)
  File "app/pricing.py", line 41, in total
    rate = DISCOUNTS[tier]
KeyError: 'platinum'
'''
DECISION = ("Decision: invoices are numbered per tenant with a Postgres sequence per tenant, "
            "not a global counter, because auditors need gap-free numbering for each company. "
            "Approved by Dana; api_key = \"sk-live-0123456789abcdef\" was used to test it.")
FILLER = [
    ("research", "The CSV export streams rows with a generator so memory stays flat."),
    ("message", "Please rename the staging bucket before Friday's demo."),
    ("code_block", "def slugify(title):\n    return re.sub(r'[^a-z0-9]+', '-', title.lower())"),
    ("task_state", "Step 3 of 5: migrating the user table; steps 4-5 are the API and docs."),
]


class Clock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime):
        self.value = start

    def __call__(self) -> datetime:
        return self.value

    def advance(self, **delta) -> None:
        self.value += timedelta(**delta)


def open_engine(root, **stash) -> tuple[Engine, Clock]:
    project = Project.open(root)
    config = dataclasses.replace(project.config,
                                 stash=dataclasses.replace(project.config.stash, **stash))
    engine = Engine(Project(project.root, config))
    clock = Clock(T0)
    engine.module.stash.now = clock
    return engine, clock


@pytest.fixture
def memory(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "app.py").write_text("def total(cart):\n    return sum(cart)\n")
    engine, clock = open_engine(root)
    yield engine, clock
    engine.close()


def seg(text: str, kind: str = "message", session: str = "agent-1", **extra) -> SegmentInput:
    return SegmentInput(text=text, type=kind, session_id=session, **extra)


def stash(engine, *segments, **options):
    return engine.stash(StashRequest(tuple(segments), **options))


def find(engine, query: str, **options):
    options.setdefault("session_id", "agent-1")
    options.setdefault("min_similarity", 0.3)
    return engine.retrieve_stashed(RetrieveRequest(query=query, **options))


def test_stash_work_on_retrieve_a_paraphrase_a_day_later_and_merge(memory):
    engine, clock = memory
    first = stash(engine, seg(TRACEBACK, "error_log", topic="checkout", source="pytest"),
                  seg(DECISION, "decision", topic="billing"))
    trace_id, decision_id = first.segment_ids
    assert first.tokens_freed > 0 and first.secrets_redacted == 1
    clock.advance(hours=2)
    stash(engine, *(seg(text, kind) for kind, text in FILLER))  # the agent works on
    clock.advance(days=1)

    crash = find(engine, "the crash creating an order: no discount for the platinum tier",
                 min_similarity=0.4)
    assert crash.segments[0].segment_id == trace_id
    hit = crash.segments[0]
    elapsed_days = 1 + 2 / 24  # created and stashed at T0; now is T0 + 26 h
    assert hit.score_parts.age == pytest.approx(math.exp(-elapsed_days / 30), abs=1e-4)
    assert hit.score_parts.recency == pytest.approx(math.exp(-elapsed_days / 7), abs=1e-4)
    assert hit.score == pytest.approx(0.6 * hit.similarity + 0.2 * hit.score_parts.age
                                      + 0.2 * hit.score_parts.recency, abs=2e-4)

    numbering = find(engine, "why are invoice numbers kept separately for every tenant",
                     min_similarity=0.4)
    assert numbering.segments[0].segment_id == decision_id

    merged = engine.merge_stashed([trace_id, decision_id])
    assert [s.segment_id for s in merged.segments] == [trace_id, decision_id]
    assert merged.segments[0].text == TRACEBACK
    assert "sk-live" not in merged.segments[1].text  # scrubbed before storing
    assert merged.tokens_added == sum(s.tokens for s in merged.segments)
    assert merged.segments[0].type == "error_log" and merged.segments[0].source == "pytest"


def test_merge_with_remove_forgets_the_segments(memory):
    engine, _ = memory
    ids = stash(engine, seg("notes about the cache warmer"), seg("retry budget is 3")).segment_ids
    merged = engine.merge_stashed(list(ids), remove=True)
    assert set(merged.removed) == set(ids)
    assert engine.list_stashed(session_id="agent-1").total == 0


def test_sessions_are_isolated_unless_asked(memory):
    engine, _ = memory
    stash(engine, seg(TRACEBACK, "error_log", session="agent-1"))
    stash(engine, seg(TRACEBACK.replace("platinum", "gold"), "error_log", session="agent-2"))
    mine = find(engine, "KeyError in the pricing discounts", session_id="agent-1")
    assert {s.session_id for s in mine.segments} == {"agent-1"}
    everyone = find(engine, "KeyError in the pricing discounts", all_sessions=True)
    assert {s.session_id for s in everyone.segments} == {"agent-1", "agent-2"}
    assert find(engine, "KeyError in pricing", session_id="nobody").segments == ()


def test_expiry_protection_and_gc(memory):
    engine, clock = memory
    short = stash(engine, seg("the flaky test is test_upload_resume"),
                  expires_in_days=1).segment_ids[0]
    kept = stash(engine, seg("the flaky test is test_upload_resume, tracked in issue 812"),
                 expires_in_days=1, protected=True).segment_ids[0]
    plain = stash(engine, seg("the flaky upload test fails on slow disks")).segment_ids[0]
    query = "which test is flaky"
    assert {s.segment_id for s in find(engine, query).segments} >= {short, kept, plain}
    clock.advance(days=2)
    visible = {s.segment_id for s in find(engine, query).segments}
    assert short not in visible and {kept, plain} <= visible
    collected = engine.gc_stash()
    assert collected.expired == (short,) and collected.aged_out == ()
    clock.advance(days=200)  # past [stash] gc_max_age_days = 30
    collected = engine.gc_stash()
    assert collected.aged_out == (plain,) and collected.remaining == 1
    assert [s.segment_id for s in engine.list_stashed(session_id="agent-1").segments] == [kept]
    engine.protect_stashed([kept], protected=False)
    assert engine.list_stashed(session_id="agent-1").segments[0].protected is False
    assert engine.gc_stash().aged_out == (kept,)


def test_identical_and_near_identical_segments_come_back_once(memory):
    engine, _ = memory
    text = "Postgres connection pool exhausted: raise max_connections or add pgbouncer"
    near = text.replace("max_connections or", "max_connections, or")  # cosine ~0.99
    ids = stash(engine, seg(text), seg(text), seg(near)).segment_ids
    other = stash(engine, seg("pgbouncer runs in transaction pooling mode")).segment_ids[0]
    found = find(engine, "database pool ran out of connections", top_k=5)
    returned = [s.segment_id for s in found.segments]
    assert returned.count(ids[0]) + returned.count(ids[1]) + returned.count(ids[2]) == 1
    best = next(s for s in found.segments if s.segment_id in ids)
    assert set(best.duplicates) | {best.segment_id} == set(ids)
    assert other in returned


def test_reference_chains_are_followed_up_to_max_hops(memory):
    engine, _ = memory
    root_id = stash(engine, seg("Plan: move the scheduler to a separate worker process")
                    ).segment_ids[0]
    mid = stash(engine, seg("Benchmark: cron jitter 40 ms", references=(root_id,))
                ).segment_ids[0]
    leaf = stash(engine, seg("The nightly billing run double-charged 12 customers on March 3",
                             "error_log", references=(mid,))).segment_ids[0]
    found = find(engine, "customers were charged twice by the nightly run", min_similarity=0.5)
    by_id = {s.segment_id: s for s in found.segments}
    hit = by_id[leaf]
    assert by_id[mid].reached_from == leaf and by_id[mid].score_parts.hops == 1
    assert by_id[mid].score == pytest.approx(hit.score * 0.5, abs=2e-4)
    assert by_id[root_id].score_parts.hops == 2
    assert by_id[root_id].score == pytest.approx(hit.score * 0.25, abs=2e-4)
    one_hop = find(engine, "customers were charged twice by the nightly run",
                   min_similarity=0.5, max_hops=1)
    assert {s.segment_id for s in one_hop.segments} == {leaf, mid}
    listed = {s.segment_id: s for s in engine.get_stashed([mid]).segments}
    assert listed[mid].referenced_by == (leaf,) and listed[mid].references == (root_id,)


def test_token_budget_is_kept(memory):
    engine, _ = memory
    ids = stash(engine, *(seg(f"Deploy note {i}: the blue-green switch needs the health check "
                              f"on port 80{i} to pass first. " * 4) for i in range(4))).segment_ids
    one = engine.get_stashed([ids[0]]).segments[0].tokens
    found = find(engine, "blue-green deployment health check", max_tokens=one * 2 + 1)
    assert len(found.segments) == 2 and found.total_tokens <= one * 2 + 1


@pytest.mark.parametrize("segments, options, message", [
    ([seg("   ")], {}, "segment 1: text is empty"),
    ([seg("ok"), seg("fine", "banana")], {}, "unknown segment type 'banana'"),
    ([seg("ok"), seg("x", references=("seg-missing",))], {},
     "segment 2: references unknown segment 'seg-missing'"),
    ([seg("x" * 5_000_000)], {}, "5.0 MB is over the 1.0 MB limit"),
    ([seg("ok", timestamp="yesterday-ish")], {}, "is not an ISO 8601 date"),
    ([seg("ok", session="*")], {}, "session_id must be a non-empty name"),
    ([seg("ok")], {"expires_in_days": -1}, "expires_in_days must be 0 (never) or more"),
])
def test_bad_stash_input_is_one_clear_error_and_writes_nothing(memory, segments, options,
                                                               message):
    engine, _ = memory
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        stash(engine, *segments, **options)
    assert engine.store.count_segments() == 0


@pytest.mark.parametrize("options, message", [
    ({"top_k": 0}, "top_k must be between 1 and 100"),
    ({"top_k": 101}, "top_k must be between 1 and 100"),
    ({"since": "2026-02-30"}, "since: '2026-02-30' is not an ISO 8601"),
    ({"since": "2026-11-05", "until": "2026-11-01"}, "is after until"),
    ({"types": ("nonsense",)}, "unknown segment type"),
    ({"max_hops": 11}, "max_hops must be between 0 and 10"),
])
def test_bad_retrieval_input_is_one_clear_error(memory, options, message):
    engine, _ = memory
    with pytest.raises(UsageError, match=message):
        find(engine, "anything", **options)


def test_filters_by_type_topic_and_time(memory):
    engine, clock = memory
    old = stash(engine, seg("Redis eviction policy set to allkeys-lru", "decision",
                            topic="cache", timestamp="2026-10-01T08:00:00Z")).segment_ids[0]
    new = stash(engine, seg("Redis memory hit 95% during the sale", "debug_output",
                            topic="cache")).segment_ids[0]
    query = "redis memory and eviction"
    assert [s.segment_id for s in find(engine, query, types=("decision",)).segments] == [old]
    assert {s.segment_id for s in find(engine, query, topic="cache").segments} == {old, new}
    assert find(engine, query, topic="other").segments == ()
    recent = find(engine, query, since="2026-11-01")
    assert [s.segment_id for s in recent.segments] == [new]
    assert [s.segment_id for s in find(engine, query, until="2026-10-02").segments] == [old]


def test_the_stash_cap_refuses_with_a_clear_error(tmp_path):
    root = tmp_path / "capped"
    root.mkdir()
    engine, _ = open_engine(root, max_segments=2)
    try:
        stash(engine, seg("one"), seg("two"))
        with pytest.raises(StashFullError, match="max_segments = 2"):
            stash(engine, seg("three"))
        assert engine.store.count_segments() == 2
    finally:
        engine.close()


def test_a_retried_stash_with_the_same_ids_stores_once(memory):
    engine, _ = memory
    request = StashRequest((seg("retry me", segment_id="seg-fixed-1"),))
    assert engine.stash(request).segment_ids == ("seg-fixed-1",)
    assert engine.stash(request).segment_ids == ("seg-fixed-1",)
    assert engine.store.count_segments() == 1
    with pytest.raises(UsageError, match="already used"):
        engine.stash(StashRequest((seg("different text", segment_id="seg-fixed-1"),)))


class RenamedModel:
    """The real model under another identity: what a model change looks like to the stash."""

    @hookimpl
    def register_embedders(self, register):
        register("renamed", lambda config: _Renamed(
            onnx_factory(dataclasses.replace(config, backend="onnx"))))


class _Renamed:
    def __init__(self, inner):
        self.inner, self.dimension = inner, inner.dimension
        self.identity = f"{inner.identity}/renamed"

    def embed(self, texts):
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_a_model_change_re_embeds_and_never_mixes_identities(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    engine, _ = open_engine(root)
    ids = stash(engine, seg(TRACEBACK, "error_log"), seg(DECISION, "decision")).segment_ids
    old_model = engine.get_stashed([ids[0]]).segments[0].embedding_model
    engine.close()
    plugin = RenamedModel()
    get_plugin_manager().register(plugin, name="renamed-model")
    try:
        project = Project.open(root)
        config = dataclasses.replace(project.config, embedding=EmbeddingConfig(backend="renamed"))
        engine = Engine(Project(project.root, config))
        engine.module.stash.now = Clock(T0)
        found = find(engine, "pricing KeyError for a customer tier")
        assert found.segments[0].segment_id == ids[0]
        models = {s.embedding_model for s in engine.get_stashed(list(ids)).segments}
        assert models == {f"{old_model}/renamed"}
        assert engine.module.stash.index().model == f"{old_model}/renamed"
        engine.close()
    finally:
        get_plugin_manager().unregister(plugin)


def test_query_context_includes_memory_only_when_the_scope_asks(memory):
    engine, _ = memory
    engine.ensure_indexed()
    trace_id = stash(engine, seg(TRACEBACK, "error_log")).segment_ids[0]
    question = "KeyError platinum discount tier in pricing total"
    plain = engine.query(QueryRequest(query=question, wait_for_model=True))
    assert not any(h.file_path.startswith("stash:") for h in plain.hits)
    with_memory = engine.query(QueryRequest(query=question, wait_for_model=True,
                                            scope=ContextScope(memory="agent-1")))
    stashed = [h for h in with_memory.hits if h.file_path.startswith("stash:")]
    assert [h.file_path for h in stashed] == [f"stash:{trace_id}"]
    other = engine.query(QueryRequest(query=question, wait_for_model=True,
                                      scope=ContextScope(memory="agent-2")))
    assert not any(h.file_path.startswith("stash:") for h in other.hits)
    task = {"description": question}  # [stash] min_similarity applies here too
    assert not any(s.file_path.startswith("stash:")
                   for s in engine.module.get_task_context(task).snippets)
    remembered = engine.module.get_task_context({**task, "memory": "agent-1"})
    assert f"stash:{trace_id}" in {s.file_path for s in remembered.snippets}
    assert "stash" in remembered.providers


def test_stash_config_defaults_match_the_seed_but_the_calibrated_cut_off():
    config = StashConfig()
    # min_similarity: 0.20 from benchmarks/bench_memory_thresholds.py, not the seed's 0.7.
    assert (config.default_top_k, config.min_similarity, config.max_hops) == (5, 0.2, 2)
    assert config.gc_max_age_days == 30


def test_disabled_memory_says_so(tmp_path):
    root = tmp_path / "off"
    root.mkdir()
    engine, _ = open_engine(root, enabled=False)
    try:
        with pytest.raises(UsageError, match=r"\[stash\] enabled = false"):
            stash(engine, seg("anything"))
    finally:
        engine.close()


def test_credentials_in_a_stashed_message_are_redacted_like_a_config_file(tmp_path):
    """Issue 27: ``stash add "password = hunter2supersecret and api_key=sk-abcdef…"`` was
    stored verbatim (a segment was read as code, where an unquoted value may be a variable),
    while the same settings in config.yml were redacted."""
    root = tmp_path / "proj"
    root.mkdir()
    engine = Engine(Project.open(root))
    try:
        line = "password = hunter2supersecret and api_key=sk-abcdef1234567890"
        stored = engine.stash(StashRequest((
            SegmentInput(text=line, type="message"),
            SegmentInput(text="DB_PASSWORD=hunter2supersecret\nHOME=/root", type="error_log"),
            SegmentInput(text="Password: required before the login form", type="message"),
            SegmentInput(text="password = read_password(path)", type="code_block"))))
        assert stored.secrets_redacted == 3
        texts = [s.text for s in engine.get_stashed(stored.segment_ids).segments]
        assert texts[0] == "password = [REDACTED] and api_key=[REDACTED]"
        assert texts[1] == "DB_PASSWORD=[REDACTED]\nHOME=/root"
        assert texts[2] == "Password: required before the login form"  # a sentence
        assert texts[3] == "password = read_password(path)"  # code: a call, not a secret
        assert all("hunter2" not in t for t in texts)
    finally:
        engine.close()


def test_issue_28_credential_forms_are_scrubbed_before_stashing(memory):
    engine, _ = memory
    done = stash(engine, seg(ISSUE_28_TRACE, "error_log", source="pytest"))
    assert done.secrets_redacted == 4
    shown = engine.merge_stashed(list(done.segment_ids)).segments[0].text
    assert "requests.post(URL" in shown and "curl -u deploy:" in shown
    for name, value in ISSUE_28_SECRETS.items():
        assert value not in shown, name
