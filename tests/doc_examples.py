"""The examples of README.md and docs/*.md, found and run as they are written.

Every fenced block whose language is ``bash``/``sh``/``shell`` or ``python`` is an example;
``json`` blocks must parse and ``toml`` blocks be settings contextd accepts. The HTML comment on the line before a fence (not
shown on GitHub) names the example and how it runs::

    <!-- example: NAME [slow] [server] [daemon] [network] -->
    <!-- example: skip: REASON -->      (a block that cannot run; the reason says why)

NAME picks its output check in ``tests/test_doc_examples.py`` (``CHECKS[NAME]``); a runnable
block without a name, or a name without a check, fails that test, so a new example is
picked up at once and cannot be added unchecked. Flags:

- ``slow``: marked ``@pytest.mark.slow``.
- ``server``: marked ``@pytest.mark.server`` (as ``daemon`` is); a real ``contextd server``
  is started on a free port first; ``9090`` in the block is that port.
- ``daemon``: the block is one command that runs until interrupted (``contextd ui``,
  ``contextd server``): it is started, its check talks to it, then it gets Ctrl-C (SIGINT)
  and must exit. ``9090`` in it is a free port.
- ``network``: needs the network (pip installs); marked ``@pytest.mark.network`` and run only
  with CONTEXTD_TEST_NETWORK=1, in a fresh ``git clone`` of this checkout's HEAD.

Blocks run in the order of the documents, in one copy of ``tests/fixtures/docs_project``
(a git repository, indexed by the first example), with ``contextd`` on PATH running this
checkout. Shell blocks run under ``bash -e -o pipefail`` with each command traced, so a
check can take one command's output (:meth:`Run.output`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "docs_project"

RUNNABLE = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}
PARSED = {"json": json.loads, "toml": tomllib.loads}
FLAGS = frozenset({"slow", "server", "daemon", "network"})
FENCE = re.compile(r"^```([\w+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
DIRECTIVE = re.compile(r"<!--\s*example:\s*(.*?)\s*-->")
# The trace line bash writes before each command (PS4); see run_shell.
TRACE = "@@doc-example@@ "
DOC_PORT = "9090"
BLOCK_TIMEOUT_S = 300


@dataclasses.dataclass
class Example:
    """One fenced block of a document, with its directive."""

    document: str
    line: int
    language: str
    code: str
    name: str | None = None
    flags: frozenset[str] = frozenset()
    skip: str | None = None
    problem: str | None = None  # a malformed directive, reported by the test

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}" + (f"-{self.name}" if self.name else "")


def collect(repo: Path = REPO) -> list[Example]:
    """Every runnable or parsed block of the documents, in reading order."""
    found = []
    for document in ["README.md", *sorted(f"docs/{p.name}" for p in (repo / "docs").glob("*.md"))]:
        text = (repo / document).read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            language = match.group(1).lower()
            if language not in RUNNABLE and language not in PARSED:
                continue
            line = text.count("\n", 0, match.start()) + 1
            before = text[:match.start()].rstrip().rsplit("\n", 1)[-1]
            example = Example(document, line, language, match.group(2))
            directive = DIRECTIVE.fullmatch(before.strip())
            if directive:
                _apply(example, directive.group(1))
            found.append(example)
    return found


def _apply(example: Example, directive: str) -> None:
    if directive.startswith("skip"):
        reason = directive[4:].lstrip(": ").strip()
        example.skip = reason
        if len(reason) < 10:
            example.problem = "a skipped example must say why (<!-- example: skip: REASON -->)"
        return
    name, *flags = directive.split()
    unknown = set(flags) - FLAGS
    if unknown:
        example.problem = f"unknown flags {sorted(unknown)}; known: {sorted(FLAGS)}"
    example.name, example.flags = name, frozenset(flags) & FLAGS


@dataclasses.dataclass
class Run:
    """What a block did: exit status, output, and the project it ran in."""

    code: str
    returncode: int
    stdout: str
    stderr: str
    project: Path
    port: int | None = None

    def output(self, fragment: str) -> str:
        """The stdout of the traced commands whose line contains ``fragment`` (quotes
        ignored), for shell blocks."""
        parts = self.stdout.split(TRACE)
        chosen = [part.split("\n", 1)[1] if "\n" in part else ""
                  for part in parts[1:]
                  if fragment in part.split("\n", 1)[0].replace("'", "")]
        assert chosen, f"no traced command contains {fragment!r}:\n{self.stdout[:2000]}"
        return "".join(chosen)

    def describe(self) -> str:
        return (f"exit {self.returncode}\n--- block ---\n{self.code}\n--- stdout ---\n"
                f"{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}")


class Environment:
    """The fixture project and the environment the examples run in."""

    def __init__(self, base: Path):
        self.project = base / "project"
        shutil.copytree(FIXTURE, self.project)
        for args in (["init", "-q"], ["add", "-A"],
                     ["-c", "user.name=docs", "-c", "user.email=docs@example.com",
                      "commit", "-q", "-m", "The shop as the docs describe it"]):
            subprocess.run(["git", *args], cwd=self.project, check=True, timeout=60)
        bin_dir = base / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "contextd"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m contextd "$@"\n')
        shim.chmod(0o755)
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                    "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}

    def run(self, example: Example, port: int | None = None) -> Run:
        code = example.code.replace(DOC_PORT, str(port)) if port else example.code
        if RUNNABLE[example.language] == "python":
            command = [sys.executable, "-c", code]
        else:
            command = ["bash", "-c", _traced(code)]
        done = subprocess.run(command, cwd=self.project, env=self.env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S)
        return Run(code, done.returncode, done.stdout, done.stderr, self.project, port)

    def start(self, code: str, port: int) -> subprocess.Popen:
        """A long-running block, in its own process group (so Ctrl-C reaches it alone)."""
        log = open(self.project.parent / f"daemon-{port}.log", "w+")
        return subprocess.Popen(["bash", "-c", f"exec {code.strip()}"], cwd=self.project,
                                env=self.env, stdout=subprocess.PIPE, stderr=log, text=True,
                                start_new_session=True)

    def server(self, port: int) -> subprocess.Popen:
        """``contextd server`` on ``port``, once it answers /readyz and has caught up with
        the files (the reader of a ``server`` example started it a while ago)."""
        process = self.start(f"contextd server --port {port}", port)
        wait_http(f"http://127.0.0.1:{port}/readyz", process)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/query_context", data=b'{"q": "index"}',
                headers={"content-type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as response:
                notes = json.loads(response.read())["notes"]
            if not any(note.startswith("still indexing") for note in notes):
                break
            time.sleep(0.5)
        return process


def interrupt(process: subprocess.Popen, timeout: float = 30) -> int:
    """Ctrl-C as a terminal sends it, then the exit status (killed after ``timeout``)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
            raise AssertionError(f"still running {timeout} s after Ctrl-C") from None
    return process.returncode


def wait_http(url: str, process: subprocess.Popen | None = None, timeout: float = 180,
              opener: urllib.request.OpenerDirector | None = None) -> str:
    """The body of ``url`` once it answers (an HTTP error status is raised at once; only a
    server not listening yet, or 503 while the index opens, is waited for)."""
    deadline = time.monotonic() + timeout
    opener = opener or urllib.request.build_opener()
    while True:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"exited with {process.returncode} before {url} answered")
        try:
            with opener.open(url, timeout=5) as response:
                return response.read().decode()
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _traced(code: str) -> str:
    """The block under ``set -e -o pipefail``, each command traced to the captured stdout
    through fd 9 (so the trace of ``$(...)`` does not land in the substitution)."""
    return (f"set -eo pipefail\nexec 9>&1\nBASH_XTRACEFD=9\nPS4='{TRACE}'\nset -x\n{code}")
