"""The project boundary on a real temporary tree: every filter and its reason.

Notes on what a test can make fail for root (the tests run as root here):
- ``chmod 000`` does not stop root from reading. The unreadable-file test therefore forks and
  drops to ``nobody`` before checking (skipped where that is impossible); the broken-symlink
  case gives ``unreadable`` for anyone.
- A FIFO is never opened (opening one would block): it is ``not_a_regular_file``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from contextd.boundary.walk import Boundary, FileEntry, RejectReason, looks_binary
from contextd.config.loading import config_from_dict
from contextd.errors import BoundaryError
from contextd.config.project import Project

R = RejectReason
TEXT = "def main():\n    return 'héllo wörld'\n"


def write(path: Path, content: str | bytes = TEXT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def make_tree(root: Path) -> Path:
    """A small project exercising every rule; returns the resolved root."""
    write(root / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(root / ".gitignore", "*.log\n!keep.log\nlogs/\n/secret.txt\n")
    write(root / ".contextignore", "drafts/\n")
    write(root / "src" / "app.py")
    write(root / "src" / "debug.log", "noise\n")
    write(root / "src" / "keep.log", "kept\n")
    write(root / "src" / "sub" / ".gitignore", "*.tmp\n!important.log\n")
    write(root / "src" / "sub" / "a.tmp", "tmp\n")
    write(root / "src" / "sub" / "important.log", "important\n")
    write(root / "src" / "sub" / "other.log", "other\n")
    write(root / "logs" / "keep.log", "pruned with its directory\n")
    write(root / "drafts" / "plan.md", "# plan\n")
    write(root / "secret.txt", "top-level only\n")
    write(root / "docs" / "secret.txt", "not anchored here\n")
    write(root / "node_modules" / "lib" / "x.js", "module.exports = 1\n")
    write(root / ".contextd" / "context.duckdb", b"DUCK\0")
    write(root / "my file.py")
    write(root / "naïve_ünïcode.py")
    write(root / "日本語.md", "# 見出し\n本文です。" * 50)
    write(root / "latin1.txt", "caf\xe9 na\xefve r\xe9sum\xe9 plain text\n".encode("latin-1"))
    write(root / "image.png", b"\x89PNG\r\n\x1a\n\0\0\0")
    write(root / "nul.txt", b"text with a \0 NUL byte")
    write(root / "noise.txt", bytes(range(0x80, 0x100)) * 8)
    write(root / "Makefile", "all:\n\techo hi\n")
    os.mkfifo(root / "src" / "pipe.py")
    return root.resolve()


def project(root: Path, **indexing) -> Project:
    raw = {"indexing": {"allowed_extensions": [".py", ".md", ".txt", ".log", ".js"],
                        **indexing}}
    return Project(root=root, config=config_from_dict(raw))


def verdicts(boundary: Boundary) -> dict[str, R | None]:
    """{path: None if indexable else reason} for everything the walk saw."""
    result = boundary.scan()
    out: dict[str, R | None] = {e.path: None for e in result.accepted}
    out.update({r.path: r.reason for r in result.rejected})
    return out


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "proj")


def test_every_filter_gives_its_reason(tree: Path) -> None:
    found = verdicts(Boundary(project(tree)))
    expected = {
        "src/app.py": None, "src/keep.log": None, "src/sub/important.log": None,
        "my file.py": None, "naïve_ünïcode.py": None, "日本語.md": None, "latin1.txt": None,
        "docs/secret.txt": None,
        ".git": R.IGNORED_PATTERN, "node_modules": R.IGNORED_PATTERN,
        ".contextd": R.INDEX_DIRECTORY,
        "src/debug.log": R.GITIGNORE, "src/sub/a.tmp": R.GITIGNORE,
        "src/sub/other.log": R.GITIGNORE, "logs": R.GITIGNORE, "secret.txt": R.GITIGNORE,
        "drafts": R.CONTEXTIGNORE,
        "image.png": R.EXTENSION_BLOCKED, "Makefile": R.EXTENSION_NOT_ALLOWED,
        ".gitignore": R.EXTENSION_NOT_ALLOWED, ".contextignore": R.EXTENSION_NOT_ALLOWED,
        "src/sub/.gitignore": R.EXTENSION_NOT_ALLOWED,
        "nul.txt": R.BINARY, "noise.txt": R.BINARY, "src/pipe.py": R.NOT_A_REGULAR_FILE,
    }
    assert found == expected


def test_rejections_explain_themselves(tree: Path) -> None:
    result = Boundary(project(tree)).scan()
    by_path = {r.path: r for r in result.rejected}
    assert by_path["src/debug.log"].detail == ".gitignore: *.log"
    assert by_path["src/sub/a.tmp"].detail == "src/sub/.gitignore: *.tmp"
    assert by_path["drafts"].detail == ".contextignore: drafts/" and by_path["drafts"].is_dir
    assert by_path["node_modules"].detail == "ignore_patterns: node_modules"
    assert by_path["nul.txt"].detail == "NUL byte in the first 8 KB"
    assert by_path["Makefile"].detail == "no extension, and allowed_extensions is set"
    entry = next(e for e in result.accepted if e.path == "src/app.py")
    assert entry == FileEntry("src/app.py", tree / "src" / "app.py",
                              (tree / "src/app.py").stat().st_size,
                              (tree / "src/app.py").stat().st_mtime_ns)


def test_check_agrees_with_the_walk_for_every_file(tree: Path) -> None:
    boundary = Boundary(project(tree))
    accepted = {e.path for e in boundary.iter_files()}
    for dirpath, _, files in os.walk(tree):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), tree)
            decision = boundary.check(rel)
            assert decision.indexable == (rel in accepted), (rel, decision)
    assert boundary.check(tree / "logs" / "keep.log").reason == R.GITIGNORE
    assert boundary.check("src/sub/a.tmp").detail == "src/sub/.gitignore: *.tmp"


def test_check_refuses_traversal_and_outside_paths(tree: Path) -> None:
    boundary = Boundary(project(tree))
    assert boundary.check("../proj/src/app.py").reason == R.PATH_TRAVERSAL
    assert boundary.check("src/./app.py").reason == R.PATH_TRAVERSAL
    assert boundary.check("/etc/passwd").reason == R.OUTSIDE_BOUNDARY
    assert boundary.check(tree / "src" / "app.py").indexable
    gone = boundary.check("src/deleted.py")
    assert (gone.indexable, gone.reason) == (False, R.NOT_FOUND)
    assert boundary.check("src/deleted.log").reason == R.GITIGNORE  # judged by name


def test_content_and_extension_modes(tree: Path) -> None:
    by_content = verdicts(Boundary(project(tree, binary_detection="content",
                                           blocked_extensions=[], allowed_extensions=[])))
    assert by_content["image.png"] == R.BINARY  # NUL bytes
    assert by_content["Makefile"] is None  # [] allows every text file
    by_extension = verdicts(Boundary(project(tree, binary_detection="extension",
                                             blocked_extensions=[], allowed_extensions=[])))
    assert by_extension["image.png"] == R.BINARY  # .png is a binary format
    assert by_extension["nul.txt"] is None  # content never read in this mode


def test_looks_binary_thresholds() -> None:
    assert looks_binary(b"", 30) is None
    assert looks_binary("日本語のテキスト".encode() * 100, 30) is None  # UTF-8, all high bytes
    assert looks_binary("é".encode()[:1] + b"a" * 10, 30) is None  # cut multi-byte at the end
    assert looks_binary(b"\x01\x02\x03\x04abcdef", 30) == "40% non-text bytes in the first 8 KB"
    assert looks_binary(b"\x01\x02\x03\x04abcdef", 40) is None
    assert looks_binary(bytes(range(0x80, 0x100)), 30) == "100% non-text bytes in the first 8 KB"
    assert looks_binary("café résumé, naïve".encode("latin-1"), 30) is None


def test_size_limits_and_exceptions(tree: Path) -> None:
    big = "x = 1\n" * 200_000  # 1.2 MB
    write(tree / "src" / "big.py", big)
    write(tree / "docs" / "huge.md", big)
    boundary = Boundary(project(tree, max_file_size_mb=1.0, warn_file_size_mb=0.5,
                                size_exceptions=["docs/*.md"]))
    result = boundary.scan()
    rejected = {r.path: r for r in result.rejected}
    assert rejected["src/big.py"].reason == R.TOO_LARGE
    assert rejected["src/big.py"].detail == "1.1 MB is above max_file_size_mb (1.0)"
    assert "docs/huge.md" in {e.path for e in result.accepted}
    assert result.large == ["docs/huge.md"]


def test_index_directory_is_excluded_even_without_patterns(tree: Path) -> None:
    raw = {"watcher": {"ignore_patterns": []}, "indexing": {"allowed_extensions": []}}
    found = verdicts(Boundary(Project(root=tree, config=config_from_dict(raw))))
    assert found[".contextd"] == R.INDEX_DIRECTORY
    assert found[".git/HEAD"] is None  # only the config's patterns excluded .git


def test_explicit_watch_paths(tree: Path) -> None:
    raw = {"watcher": {"watch_paths": ["src", "src/sub"]},
           "indexing": {"allowed_extensions": [".py", ".log"]}}
    boundary = Boundary(Project(root=tree, config=config_from_dict(raw)))
    assert boundary.watch_roots == [tree / "src"]  # the inner path is not walked twice
    files = [e.path for e in boundary.iter_files()]
    assert files == ["src/app.py", "src/keep.log", "src/sub/important.log"]
    assert boundary.check("my file.py").reason == R.OUTSIDE_BOUNDARY
    assert boundary.check("src/debug.log").reason == R.GITIGNORE  # root .gitignore applies


def test_one_boundary_follows_its_ignore_files_as_they_change(tree: Path) -> None:
    """The compiled patterns of an ignore file are kept between checks (a checkout's
    batch judged every path's ancestors' ignore files again) and compiled anew when the
    file changes, is added or is removed: a boundary that lives on in an owner judges by
    the rules on disk now."""
    boundary = Boundary(project(tree))
    assert boundary.check("src/sub/notes.py").reason == R.NOT_FOUND
    write(tree / "src" / "sub" / "notes.py")
    assert boundary.check("src/sub/notes.py").indexable
    ignore = tree / "src" / "sub" / ".gitignore"
    with open(ignore, "a", encoding="utf-8") as fh:  # edited in place: the same inode
        fh.write("notes.py\n")
    decision = boundary.check("src/sub/notes.py")
    assert (decision.reason, decision.detail) == (R.GITIGNORE, "src/sub/.gitignore: notes.py")
    ignore.unlink()
    assert boundary.check("src/sub/notes.py").indexable
    assert boundary.check("src/sub/important.log").detail == ".gitignore: *.log"  # its
    # !important.log went with it
    write(tree / "src" / ".contextignore", "sub/\n")  # a new ignore file higher up
    assert boundary.check("src/sub/notes.py").reason == R.CONTEXTIGNORE
    assert "src/sub" not in set(boundary.directories("src"))


def test_is_ignore_file(tree: Path) -> None:
    boundary = Boundary(project(tree))
    assert boundary.is_ignore_file("src/sub/.gitignore")
    assert boundary.is_ignore_file(tree / ".contextignore")
    assert boundary.is_ignore_file("context.toml")
    assert not boundary.is_ignore_file("src/app.py")


# ---------------------------------------------------------------------------- symlinks

@pytest.fixture()
def linked(tmp_path: Path) -> Path:
    root = make_tree(tmp_path / "proj")
    outside = write(tmp_path / "outside" / "secret.py")
    os.symlink("app.py", root / "src" / "link_in.py")
    os.symlink(outside, root / "src" / "link_out.py")
    os.symlink(outside.parent, root / "src" / "dir_out")
    os.symlink("..", root / "src" / "loop")
    os.symlink("missing.py", root / "src" / "broken.py")
    os.symlink("../drafts", root / "src" / "drafts_link")
    os.symlink("link_in.py", root / "src" / "chain.py")
    os.symlink("cycle_b.py", root / "src" / "cycle_a.py")
    os.symlink("cycle_a.py", root / "src" / "cycle_b.py")
    return root


LINKS = ("src/link_in.py", "src/link_out.py", "src/dir_out", "src/loop", "src/broken.py",
         "src/drafts_link", "src/chain.py", "src/cycle_a.py", "src/cycle_b.py")


def test_symlinks_not_followed_by_default(linked: Path) -> None:
    boundary = Boundary(project(linked))
    found = verdicts(boundary)
    assert {path: found[path] for path in LINKS} == dict.fromkeys(LINKS,
                                                                  R.SYMLINK_NOT_FOLLOWED)
    assert boundary.check("src/link_in.py").reason == R.SYMLINK_NOT_FOLLOWED
    assert boundary.check("src/drafts_link/plan.md").reason == R.SYMLINK_NOT_FOLLOWED


def test_followed_symlinks_stay_inside_and_terminate(linked: Path) -> None:
    boundary = Boundary(project(linked, follow_symlinks=True, max_symlink_depth=1))
    found = verdicts(boundary)
    assert {path: found.get(path) for path in LINKS} == {
        "src/link_in.py": R.SYMLINK_DUPLICATE, "src/link_out.py": R.SYMLINK_ESCAPE,
        "src/dir_out": R.SYMLINK_ESCAPE, "src/loop": R.SYMLINK_LOOP,
        "src/broken.py": R.UNREADABLE, "src/drafts_link": None,
        "src/chain.py": R.SYMLINK_TOO_DEEP, "src/cycle_a.py": R.SYMLINK_LOOP,
        "src/cycle_b.py": R.SYMLINK_LOOP}
    # A link into a pruned directory is walked under its own (not ignored) name.
    assert found["src/drafts_link/plan.md"] is None
    assert not any("outside" in path or "secret.py" == Path(path).name for path in found
                   if found[path] is None)
    assert boundary.check("src/link_out.py").reason == R.SYMLINK_ESCAPE
    assert boundary.check("src/loop/src/app.py").reason == R.SYMLINK_LOOP
    assert boundary.check("src/drafts_link/plan.md").indexable


def test_symlink_depth_allows_chains_within_limit(linked: Path) -> None:
    found = verdicts(Boundary(project(linked, follow_symlinks=True, max_symlink_depth=2)))
    assert found["src/chain.py"] == R.SYMLINK_DUPLICATE  # followed, then seen as app.py


# ---------------------------------------------------------------------------- unreadable

def test_unreadable_file_for_an_unprivileged_user() -> None:
    """chmod 000 stops everyone but root, so as root the check runs in a child as nobody."""
    root = Path(tempfile.mkdtemp(prefix="ctxd-unreadable-"))
    try:
        os.chmod(root, 0o755)
        write(root / "ok.py")
        os.chmod(write(root / "secret.py"), 0)
        os.mkdir(root / "locked")
        write(root / "locked" / "inner.py")
        os.chmod(root / "locked", 0)
        results = _run_as_nobody(lambda: _unreadable_verdicts(root.resolve()))
    finally:
        os.chmod(root / "locked", 0o755)
        shutil.rmtree(root)
    assert results == {"ok.py": None, "secret.py": "unreadable", "locked": "unreadable",
                       # check-file on a file in the locked folder: unreadable, and why;
                       # it exists (it used to say "does not exist")
                       "check locked/inner.py": "unreadable",
                       "why locked/inner.py": "locked/inner.py cannot be reached: Permission "
                                              "denied (the folder locked is not readable)"}


def _unreadable_verdicts(root: Path) -> dict[str, str | None]:
    boundary = Boundary(project(root))
    found = verdicts(boundary)
    inner = boundary.check("locked/inner.py")
    return {**{path: reason.value if reason else None for path, reason in found.items()},
            "check locked/inner.py": inner.reason.value, "why locked/inner.py": inner.detail}


def _run_as_nobody(func):
    if os.geteuid() != 0:
        return func()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop privileges, answer through the pipe, never return to pytest
        try:
            os.close(reader)
            os.setgid(65534)
            os.setuid(65534)
            os.write(writer, json.dumps(func()).encode())
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    if not data:
        pytest.skip("could not switch to user nobody")
    return json.loads(data)


# ---------------------------------------------------------------------------- dangerous roots

@pytest.mark.parametrize("root", ["/", "/etc", "/usr", "/var"])
def test_dangerous_roots_are_refused(root: str) -> None:
    with pytest.raises(BoundaryError, match="refusing|too broad"):
        Boundary(Project(root=Path(root), config=config_from_dict({})))


def test_home_directory_is_refused_in_auto_mode() -> None:
    with pytest.raises(BoundaryError, match="your home directory"):
        Boundary(Project(root=Path.home().resolve(), config=config_from_dict({})))


def test_config_errors_stop_the_boundary(tree: Path) -> None:
    raw = {"watcher": {"watch_paths": ["missing", "gone"]}}
    with pytest.raises(BoundaryError) as info:
        Boundary(Project(root=tree, config=config_from_dict(raw)))
    message = str(info.value)
    assert "\n" not in message
    assert message.endswith("(and 1 more); run 'contextd validate-config'")


def test_hidden_folders_and_private_or_secret_files_are_left_out_by_default(tmp_path: Path
                                                                              ) -> None:
    """The spec's defaults (issue 40): hidden directories are excluded (the default
    ignore_patterns hold ``.*/``; a project may drop it), and ``*.private`` / ``*.secret``
    files are never indexed, whatever the settings."""
    root = tmp_path / "proj"
    write(root / "src" / "app.py")
    write(root / ".github" / "workflows" / "ci.py")
    write(root / "src" / ".cache" / "blob.py")
    write(root / "src" / ".hidden_file.py")  # a hidden file, not a folder: indexed
    write(root / "notes.private", "my notes\n")
    write(root / "src" / "tokens.secret", "tok\n")
    raw = {"indexing": {"allowed_extensions": [".py", ".private", ".secret"]}}
    found = verdicts(Boundary(Project(root=root.resolve(), config=config_from_dict(raw))))
    assert found == {"src/app.py": None, "src/.hidden_file.py": None,
                     ".github": R.IGNORED_PATTERN, "src/.cache": R.IGNORED_PATTERN,
                     "notes.private": R.SECRET_FILE, "src/tokens.secret": R.SECRET_FILE}
    raw["watcher"] = {"ignore_patterns": [".git"]}
    found = verdicts(Boundary(Project(root=root.resolve(), config=config_from_dict(raw))))
    assert found[".github/workflows/ci.py"] is None and found["src/.cache/blob.py"] is None
    assert found["notes.private"] is R.SECRET_FILE
