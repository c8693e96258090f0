"""The owner's own memory, as ``contextd stats`` reports it (issue 26: an owner held 1.7-2 GB
and nothing said so)."""

from __future__ import annotations

import os
import resource


def memory_figures(limit_mb: int) -> dict[str, object]:
    """This process's resident size now and at its peak, in MB, beside ``[owner]
    memory_limit_mb``: {"pid", "rss_mb", "peak_rss_mb", "memory_limit_mb"}."""
    rss = peak = None
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
    except OSError:  # not Linux: the peak from getrusage (kilobytes on Linux, bytes on macOS)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024)
    return {"pid": os.getpid(), "rss_mb": round(rss, 1) if rss is not None else None,
            "peak_rss_mb": round(peak, 1) if peak is not None else None,
            "memory_limit_mb": limit_mb}
