"""The LLM contextualizer (opt-in): a 50-100 word prefix per chunk, written by a language model
the user runs or rents, with a fixed prompt and quality checks on what it writes.

The endpoint is whatever ``[contextualizer] llm_endpoint`` names (an OpenAI-compatible
``/v1/chat/completions`` server or Ollama's ``/api/chat``); there is no default, so nothing
leaves the machine unless the user configured it. Requests go through ``urllib`` with a bounded
thread pool. An answer that fails the quality checks (length, key terms of the chunk, generic
openings such as "This section discusses") is retried; a chunk whose attempts all fail gets an
empty prefix here, which the pipeline (:mod:`contextd.contextualizers.stage`) replaces by the
structural one and does not cache, so a later run asks again.
"""

from __future__ import annotations

import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from contextd.records import Chunk
from contextd.text.prefix_rating import (
    key_terms_of, share_point, structural_quality, terms_and_phrase,
)
from contextd.text.tokens import estimate_tokens

# The prompt, with the chunk's path as title and its language as type.
CONTEXT_PROMPT = """You are helping improve search by adding context to text chunks.

Given a document and a specific chunk from that document, generate a brief
(50-100 word) contextual prefix that explains:
1. What this chunk is about
2. How it relates to the larger document
3. Key domain/technical context

Document Title: {title}
Document Type: {doc_type}

Full Document:
{document}

Specific Chunk to Contextualize:
{chunk}

Generate a 50-100 word contextual prefix that will help someone searching
for this information. Be specific and include key terms.

Contextual Prefix:"""

_WORD_RE = re.compile(r"\S+")
OPENAI_PATH = "/v1/chat/completions"
OLLAMA_PATH = "/api/chat"
TOKENS_PER_THOUSAND = 1000.0


class LLMError(Exception):
    """The endpoint failed or answered something unusable (the chunk falls back)."""


def key_terms(chunk: Chunk) -> list[str]:
    """The terms a good prefix should mention: names the chunk defines, then its most
    frequent distinctive identifiers."""
    return key_terms_of([d.name for d in chunk.defines], chunk.text)


@dataclass(frozen=True)
class Verdict:
    """The outcome of the quality checks on one answer; ``score`` is in [0, 1]."""

    ok: bool
    score: float
    reason: str = ""


def check_quality(prefix: str, chunk: Chunk, settings) -> Verdict:
    """A prefix passes with its length within [min_words, max_words], at least
    ``min_key_term_share`` of the chunk's key terms mentioned, and no generic phrase."""
    words = len(_WORD_RE.findall(prefix))
    terms = key_terms(chunk)
    mentioned, generic = terms_and_phrase(prefix, terms)
    share = mentioned / len(terms) if terms else 1.0
    length_ok = settings.min_words <= words <= settings.max_words
    score = (float(length_ok) + share_point(share, settings.min_key_term_share)
             + float(not generic)) / 3
    if not length_ok:
        return Verdict(False, score, f"{words} words, wanted {settings.min_words}-"
                                     f"{settings.max_words}")
    if share < settings.min_key_term_share:
        return Verdict(False, score, f"mentions {mentioned} of {len(terms)} key terms")
    if generic:
        return Verdict(False, score, f"generic phrase {generic!r}")
    return Verdict(True, score)


def prefix_quality(prefix: str, chunk: Chunk, settings, *, generated: bool) -> float | None:
    """The quality score (0-1) of a chunk's prefix: check_quality's checks. A generated
    (LLM) prefix is rated on all three (length, key terms, no generic phrase) when it is
    written, and stored with its score; a structural one as
    :func:`contextd.text.prefix_rating.structural_quality` rates it, which the reports do
    when asked rather than the index path (issue 37)."""
    if not prefix:
        return None
    if generated:
        return round(check_quality(prefix, chunk, settings).score, 4)
    return structural_quality(prefix, [d.name for d in chunk.defines], chunk.text,
                              settings.min_key_term_share)


def document_excerpt(document: str, chunk: Chunk, max_tokens: int) -> str:
    """The document, or when it is over ``max_tokens`` the lines around the chunk that fit
    (the chunk's neighbourhood says most about it)."""
    if estimate_tokens(document) <= max_tokens:
        return document
    lines = document.splitlines()
    lo, hi = chunk.start_line - 1, chunk.end_line
    spent = estimate_tokens("\n".join(lines[lo:hi]))
    while lo > 0 or hi < len(lines):
        grew = False
        for side in ("up", "down"):
            index = lo - 1 if side == "up" else hi
            if 0 <= index < len(lines):
                cost = estimate_tokens(lines[index]) + 1
                if spent + cost > max_tokens:
                    continue
                spent += cost
                lo, hi = (index, hi) if side == "up" else (lo, index + 1)
                grew = True
        if not grew:
            break
    return "\n".join(lines[lo:hi])


@dataclass
class LLMCounters:
    """Token and cost accounting of one contextualizer."""

    requests: int = 0
    failures: int = 0
    rejected: int = 0
    accepted: int = 0
    gave_up: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class LLMContextualizer:
    """Prefixes from an HTTP LLM endpoint; ``cache_model`` keys the prefix cache."""

    name = "llm"
    # Read from the class before one is built (contextualize.needs_store).
    caches_prefixes = True

    def __init__(self, config):
        self.settings = config.contextualizer
        if not self.settings.llm_endpoint or not self.settings.llm_model:
            raise ValueError("contextualizer strategy 'llm' needs [contextualizer] llm_endpoint "
                             "and llm_model in context.toml")
        self.cache_model = f"{self.settings.llm_api}:{self.settings.llm_model}"
        self.counters = LLMCounters()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.settings.llm_concurrency,
                                        thread_name_prefix="contextd-llm")

    def prefixes(self, document: str, path: str, chunks: list[Chunk]) -> list[str]:
        """One accepted prefix per chunk, or "" where every attempt failed."""
        return list(self._pool.map(lambda c: self.generate(document, path, c), chunks))

    def generate(self, document: str, path: str, chunk: Chunk) -> str:
        """Ask for a prefix, retrying failed or rejected answers; "" when all attempts fail."""
        prompt = CONTEXT_PROMPT.format(
            title=path, doc_type=chunk.language,
            document=document_excerpt(document, chunk, self.settings.llm_max_document_tokens),
            chunk=chunk.text)
        for _ in range(self.settings.llm_max_retries + 1):
            try:
                answer = self._complete(prompt).strip()
            except LLMError:
                self._count(failures=1)
                continue
            if check_quality(answer, chunk, self.settings).ok:
                self._count(accepted=1)
                return answer
            self._count(rejected=1)
        self._count(gave_up=1)
        return ""

    def _count(self, prompt_tokens: int = 0, completion_tokens: int = 0, **events: int) -> None:
        s = self.settings
        with self._lock:
            c = self.counters
            for key, value in events.items():
                setattr(c, key, getattr(c, key) + value)
            c.prompt_tokens += prompt_tokens
            c.completion_tokens += completion_tokens
            c.cost += (prompt_tokens * s.price_per_1k_input_tokens
                       + completion_tokens * s.price_per_1k_output_tokens) / TOKENS_PER_THOUSAND

    def _complete(self, prompt: str) -> str:
        """One chat request; returns the answer text and counts its tokens."""
        s = self.settings
        messages = [{"role": "user", "content": prompt}]
        if s.llm_api == "ollama":
            url = s.llm_endpoint.rstrip("/") + OLLAMA_PATH
            body = {"model": s.llm_model, "messages": messages, "stream": False,
                    "options": {"temperature": s.llm_temperature,
                                "num_predict": s.llm_max_output_tokens}}
        else:
            base = s.llm_endpoint.rstrip("/")
            url = base + ("/chat/completions" if base.endswith("/v1") else OPENAI_PATH)
            body = {"model": s.llm_model, "messages": messages,
                    "temperature": s.llm_temperature, "max_tokens": s.llm_max_output_tokens}
        # Imported here: urllib.request brings http.client and the email parser (~0.1 s of
        # a first command at load 5), and only a configured LLM endpoint needs them.
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"}
        key = os.environ.get(s.llm_api_key_env) if s.llm_api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(url, json.dumps(body).encode("utf-8"), headers)
        self._count(requests=1)
        try:
            with urllib.request.urlopen(request, timeout=s.llm_timeout_s) as response:
                reply = json.loads(response.read().decode("utf-8"))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise LLMError(f"{url}: {exc}") from exc
        return self._parse(reply, prompt)

    def _parse(self, reply: dict, prompt: str) -> str:
        """Answer text of an OpenAI or Ollama reply, counting the tokens it reports (or our
        estimate when the server reports none)."""
        try:
            if self.settings.llm_api == "ollama":
                text = reply["message"]["content"]
                used = (reply.get("prompt_eval_count"), reply.get("eval_count"))
            else:
                text = reply["choices"][0]["message"]["content"]
                usage = reply.get("usage") or {}
                used = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"unexpected reply shape: {exc!r}") from exc
        if not isinstance(text, str):
            raise LLMError("reply content is not text")
        self._count(prompt_tokens=used[0] if used[0] is not None else estimate_tokens(prompt),
                    completion_tokens=used[1] if used[1] is not None else estimate_tokens(text))
        return text

    def close(self) -> None:
        """Stop the worker threads."""
        self._pool.shutdown(wait=False, cancel_futures=True)
