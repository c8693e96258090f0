"""Progress: the running job in full (the frame's live line, larger) and the progress log."""

from __future__ import annotations

from contextd.web.layout import table

PATH = "/live"
TITLE = "Progress"

SCRIPT = """
async function reloadLog(){
  const r = await fetch('/progress?limit=50'); if(!r.ok) return;
  const rows = (await r.json()).reverse().map(e => '<tr><td>'+e.time+'</td><td>'+e.event+
    '</td><td>'+(e.job_type||'')+'</td><td>'+(e.files_total!=null ? (e.files_processed??'')+
    ' / '+e.files_total : '')+'</td><td>'+(e.chunks_processed??'')+
    (e.chunks_pending!=null ? ' ('+e.chunks_pending+' pending)' : '')+'</td></tr>');
  document.querySelector('#log tbody').innerHTML = rows.join('');
}
let lastGeneration = null;
document.addEventListener('contextd-progress', e => {
  if(e.detail.generation !== lastGeneration){lastGeneration = e.detail.generation; reloadLog()}
});
setInterval(reloadLog, 3000);
"""


async def body(request, ctx) -> str:
    entries = list(reversed(ctx.feed.entries(50)))
    log = table(["time", "event", "job", "files", "chunks"], [
        (e.get("time"), e.get("event"), e.get("job_type"),
         f"{e.get('files_processed', '')} / {e.get('files_total')}"
         if e.get("files_total") is not None else "",
         f"{e.get('chunks_processed')}" + (f" ({e['chunks_pending']} pending)"
                                           if e.get("chunks_pending") is not None else ""))
        for e in entries], table_id="log")
    return ('<p class="muted">Figures are pushed at most twice a second; the same events '
            "are appended to <code>.contextd/progress.jsonl</code> "
            '(<a href="/progress">as JSON</a>).</p>'
            f"<h2>Progress log</h2>{log}")
