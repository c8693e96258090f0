"""The HTML every page shares: the frame with its navigation and live status line, the
style sheet, the script that keeps live figures current, and small builders (tables,
figures) so that pages stay a few lines of their own. Everything interpolated is escaped
here or by the caller with :func:`esc`."""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

esc = html.escape

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:center}
header a{color:#c9d3e6;text-decoration:none}header a.active{color:#fff;font-weight:600}
header .brand{font-weight:700;color:#fff}
main{padding:16px 20px;max-width:1200px}
h1{font-size:20px;margin:8px 0 16px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;background:#fff;width:100%;margin-bottom:12px}
th,td{border-bottom:1px solid #e3e6ec;padding:5px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-bottom:12px}
.card{background:#fff;border:1px solid #e3e6ec;border-radius:6px;padding:10px 14px;min-width:130px}
.card b{display:block;font-size:20px}
.bar{background:#e3e6ec;border-radius:4px;height:14px;overflow:hidden;margin:6px 0}
.bar span{display:block;height:100%;background:#3b82f6;transition:width .3s}
pre{background:#fff;border:1px solid #e3e6ec;padding:8px;overflow:auto;font-size:12.5px}
mark{background:#fde68a}
.muted{color:#6b7280}.ok{color:#047857}.bad{color:#b91c1c}
button{padding:5px 12px;border-radius:4px;border:1px solid #9aa3b2;background:#fff;cursor:pointer}
button.danger{border-color:#b91c1c;color:#b91c1c}
form.inline{display:inline}
input,select{padding:4px 6px}
#message{margin:8px 0;min-height:1.4em}
"""

SCRIPT = """
const live = document.getElementById('live');
function fmt(n){return n==null?'?':Number(n).toLocaleString()}
function render(s){
  if(!live) return;
  if(!s.ready){live.innerHTML='<span class="muted">opening the index… '+(s.error||'')+'</span>';return}
  const job = s.jobs[0];
  const head = job ? job.job_type.replace('_',' ')+' '+job.status.replace('_',' ') : s.state;
  let text = '<b id="live-state">'+head+'</b>';
  const em = s.embedding;
  if(em){
    const total = em.done + (em.pending||0), pct = total ? Math.floor(100*em.done/total) : 0;
    text += '<div id="live-embedding">embedding in the background: <span id="live-embedded">'+
      fmt(em.done)+' / '+fmt(total)+'</span> chunks ('+pct+'%)'+
      (em.rate_per_s ? ', '+em.rate_per_s+' chunks/s' : '')+
      (em.eta_seconds!=null ? ', ETA '+em.eta_seconds+' s' : '')+
      '<div class="bar"><span style="width:'+pct+'%"></span></div></div>';
  } else if(s.embeddings_pending) text += ' · '+fmt(s.embeddings_pending)+' chunks waiting for vectors';
  if(job){
    text += '<div id="live-job" data-job="'+job.job_id+'" data-status="'+job.status+'">'+job.job_type+' '+job.status+
      ': <span id="live-files">'+fmt(job.files_processed)+' / '+fmt(job.files_total)+'</span> files, '+
      fmt(job.chunks_processed)+' chunks ('+job.percent+'%), '+job.files_per_s+' files/s, '+
      job.chunks_per_s+' chunks/s'+(job.eta_s!=null?', ETA '+job.eta_s+' s':'')+
      (job.current_file?' · <code>'+job.current_file.replace(/[<&]/g,'')+'</code>':'')+
      (job.job_type.startsWith('rebuild')?' <button id="live-cancel" class="danger" '+
       'onclick="cancelJob(this.dataset.job)" data-job="'+job.job_id+'">Cancel</button>':'')+
      '<div class="bar"><span style="width:'+job.percent+'%"></span></div></div>';
  } else if(!em) text += ' · <span id="live-idle">no job running</span>';
  live.innerHTML = text;
  document.dispatchEvent(new CustomEvent('contextd-progress',{detail:s}));
}
const events = new EventSource('/events');
events.onmessage = e => render(JSON.parse(e.data));
async function cancelJob(id){ await post('/api/jobs/'+encodeURIComponent(id)+'/cancel', {}) }
async function post(url, body){
  const box = document.getElementById('message');
  const r = await fetch(url,{method:'POST',headers:{'content-type':'application/json'},
                            body:JSON.stringify(body||{})});
  const data = await r.json().catch(()=>({message:r.statusText}));
  if(box){box.textContent=data.message||'';box.className=r.ok?'ok':'bad'}
  return {ok:r.ok,status:r.status,data};
}
"""

def page(title: str, path: str, body: str, project: str, nav: Sequence[tuple[str, str]],
         extra_script: str = "") -> str:
    """A whole page: header with navigation (``nav``: path and title of every page), the
    live status line, then ``body``."""
    links = "".join(f'<a href="{href}" class="{"active" if href == path else ""}">{esc(name)}'
                    f"</a>" for href, name in nav)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>{esc(title)} · contextd</title><style>{STYLE}</style></head><body>"
            f'<header><span class="brand">contextd</span>{links}'
            f'<span class="muted">{esc(project)}</span></header><main>'
            f'<div id="live" class="card"><span class="muted">connecting…</span></div>'
            f'<div id="message"></div><h1>{esc(title)}</h1>{body}</main>'
            f"<script>{SCRIPT}{extra_script}</script></body></html>")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], raw: bool = False,
          table_id: str = "") -> str:
    """A table; cells are escaped unless ``raw`` (the caller built safe HTML)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else esc(_text(c))}</td>" for c in row)
                   + "</tr>" for row in rows)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def cards(figures: Iterable[tuple[str, Any]]) -> str:
    """Big figures side by side."""
    return '<div class="cards">' + "".join(
        f'<div class="card"><b>{esc(_text(value))}</b>{esc(label)}</div>'
        for label, value in figures) + "</div>"


def _text(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    return str(value)


def int_param(raw: str | None, default: int, low: int, high: int) -> int:
    """An integer query parameter, clamped to [low, high]; the default when absent or not a
    number (a page never fails on a hand-edited URL)."""
    try:
        return max(low, min(int(raw), high)) if raw else default
    except ValueError:
        return default
