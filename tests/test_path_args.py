"""The path arguments of a refresh, checked as a batch (a ``git checkout``'s hundreds of paths)
exactly as each would be checked alone, on a real tree whose root is itself a link."""

from __future__ import annotations

import os

from contextd.boundary.path_args import check_path, check_paths


def test_a_batch_is_judged_as_each_path_alone_under_a_linked_root(tmp_path):
    real = tmp_path / "real"
    (real / "docs").mkdir(parents=True)
    (real / "docs" / "a.md").write_text("# A\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# S\n")
    os.symlink(outside, real / "docs" / "out")
    os.symlink(real / "docs" / "a.md", real / "inner.md")
    root = tmp_path / "root"
    os.symlink(real, root)  # the root reached through a link: its real path differs
    paths = ["docs/a.md", "docs", "inner.md", "docs/out/secret.md", "docs/out",
             str(root / "docs" / "a.md"), "gone.md", "../real/docs/a.md", "~/x"]
    known = {"gone.md"}.__contains__

    accepted, refused = check_paths(root, paths, known)

    alone = [check_path(root, raw, known) for raw in paths]
    assert accepted == [rel for rel, reason in alone if reason is None]
    assert [r.reason for r in refused] == [reason for _, reason in alone if reason is not None]
    assert accepted == ["docs/a.md", "docs", "inner.md", "docs/a.md", "gone.md"]
    assert [r.path for r in refused] == ["docs/out/secret.md", "docs/out",
                                         "../real/docs/a.md", "~/x"]
