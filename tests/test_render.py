"""The <project_context> block: order, grouping, escaping, trimming to a budget, JSON."""

from __future__ import annotations

from contextd.records import ContextSnippet, TaskContext
from contextd.query.render import render_context, render_json
from contextd.text.tokens import estimate_tokens


def snip(cid, score, path, text="x = 1", label="f", language="python", start=1):
    return ContextSnippet(chunk_id=cid, score=score, file_path=path, label=label, kind="CODE",
                          text=text, language=language, start_line=start,
                          end_line=start + text.count("\n"), tokens=estimate_tokens(text),
                          providers=("semantic", "symbol"))


def test_sorted_grouped_and_attributed():
    ctx = TaskContext("t", "q", (snip("a", 0.5, "b.py", start=30), snip("b", 0.9, "a.py"),
                                 snip("c", 0.7, "b.py", start=1), snip("d", 0.6, "c.ts",
                                                                       language="typescript")))
    block = render_context(ctx)
    order = [line.split('path="')[1].split('"')[0] for line in block.splitlines()
             if "<snippet" in line]
    assert order == ["a.py", "b.py", "b.py", "c.ts"]
    assert 'lang="ts"' in block and 'source="semantic,symbol"' in block
    assert 'lines="30-30"' in block and 'score="0.90"' in block


def test_attributes_escaped_and_closing_tags_neutralised():
    ctx = TaskContext("t", "q", (snip("a", 1, 'we"ird<&>.py', text="s = '</snippet>'",
                                      label='a "b" <c>'),))
    block = render_context(ctx)
    assert 'path="we&quot;ird&lt;&amp;&gt;.py"' in block
    assert 'label="a &quot;b&quot; &lt;c&gt;"' in block
    assert block.count("</snippet>") == 1


def test_trimmed_to_fit_the_budget():
    text = "\n".join(f"value_{i} = compute_something({i}, other_{i})" for i in range(80))
    ctx = TaskContext("t", "q", tuple(snip(str(i), 1 - i / 10, f"f{i}.py", text=text)
                                      for i in range(3)))
    for budget in (160, 400, 900):
        block = render_context(ctx, max_tokens=budget)
        assert estimate_tokens(block) <= budget
        assert "<snippet" in block


def test_json_form():
    ctx = TaskContext("t", "q", (snip("a", 0.2, "z.py"), snip("b", 0.9, "y.py")), 4)
    data = render_json(ctx)
    assert [s["chunk_id"] for s in data["snippets"]] == ["b", "a"]
    assert data["task_id"] == "t" and data["total_tokens"] == 4


def test_a_trimmed_markdown_snippet_closes_the_code_block_it_cut():
    """Issue 27: ``--render --budget 300`` cut a README's code block without its closing
    fence, turning the rest of the prompt into code."""
    commands = "\n".join(f"pip install package-number-{i} --upgrade --quiet" for i in range(60))
    text = f"## Install\n\nRun these:\n\n```bash\n{commands}\n```\n\nThen start it."
    ctx = TaskContext("t", "q", (snip("a", 0.9, "README.md", text=text, label="Install",
                                      language="markdown"),))
    block = render_context(ctx, max_tokens=300)
    assert estimate_tokens(block) <= 300
    body = block.split("<snippet", 1)[1].split("</snippet>")[0]
    fences = [line for line in body.splitlines() if line.startswith("```")]
    assert fences == ["```bash", "```"], body
    assert body.rstrip().endswith("```")
    assert 'lines="1-' in block and f'lines="1-{text.count(chr(10)) + 1}"' not in block
