"""Jobs: start a refresh or a rebuild, cancel one, and the history with reports."""

from __future__ import annotations

from contextd.store.base import Job
from contextd.web.layout import esc, table

PATH = "/jobs"
TITLE = "Jobs"

SCRIPT = """
async function startRefresh(){ await post('/api/refresh', {}) }
async function startRebuild(){
  if(!document.getElementById('confirm-rebuild').checked){
    const box=document.getElementById('message');
    box.textContent='Tick "I understand" first: a rebuild deletes the index and re-creates it.';
    box.className='bad'; return }
  await post('/api/rebuild', {confirm: true});
}
"""


async def body(request, ctx) -> str:
    jobs = await ctx.call("job_history", limit=50)
    rows = []
    for job in jobs:
        action = ""
        if job.status in ("queued", "in_progress"):
            action = (f'<button class="danger cancel" data-job="{esc(job.job_id)}" '
                      f'onclick="cancelJob(this.dataset.job)">Cancel</button>')
        rows.append((esc(job.job_id), esc(job.job_type),
                     f'<span class="status">{esc(job.status)}</span>',
                     esc(job.scope or ""),
                     f'{job.files_processed or 0:,} / {job.files_total or 0:,}',
                     f'{job.chunks_processed or 0:,}', esc(job.started_at or ""),
                     esc(job.completed_at or ""), _report(job), action))
    history = table(["job", "type", "status", "scope", "files", "chunks", "started", "ended",
                     "report", ""], rows, raw=True, table_id="jobs")
    return ('<div id="job-controls">'
            '<button id="refresh" onclick="startRefresh()">Update index (refresh changed files)'
            '</button> &nbsp; <label><input type="checkbox" id="confirm-rebuild"> I understand '
            'a rebuild deletes the index and re-creates it</label> '
            '<button class="danger" id="rebuild" onclick="startRebuild()">Rebuild</button>'
            '<p class="muted">One rebuild at a time; a second is refused until the first ends '
            "or is cancelled.</p></div>"
            f"<h2>History</h2>{history}"
            '<p class="muted">A running job shows in the live line above (Cancel is '
            "there); reload for the history.</p>")


def _report(job: Job) -> str:
    metrics = job.metrics or {}
    if job.error_message:
        return f'<span class="bad">{esc(job.error_message)}</span>'
    if metrics.get("dry_run"):
        return "dry run"
    if "files_indexed" in metrics:
        summary = (f'{metrics.get("files_indexed", 0):,} indexed, '
                   f'{metrics.get("files_failed", 0):,} failed, '
                   f'{metrics.get("chunks_written", 0):,} chunks, '
                   f'{metrics.get("chunks_embedded", 0):,} embedded in '
                   f'{metrics.get("seconds", 0):.1f} s')
        log = "\n".join(metrics.get("log") or [])
        return esc(summary) + (f"<details><summary>log</summary><pre>{esc(log)}</pre></details>"
                               if log else "")
    return ""
