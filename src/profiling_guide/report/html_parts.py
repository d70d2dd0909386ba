"""The report pages' table cells and tables: escaped, numbers right-aligned, wide tables scrolling on a phone."""

from __future__ import annotations

import html


def cell(value, *, title: str | None = None, num: bool = False, cls: str = "") -> str:
    classes = " ".join(c for c in ("num" if num else "", cls) if c)
    attrs = (f' class="{classes}"' if classes else "") + (f' title="{html.escape(title)}"' if title else "")
    return f"<td{attrs}>{html.escape(str(value))}</td>"


def table(headers: list[str] | None, rows: list[str]) -> str:
    head = "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr></thead>" if headers else ""
    body = "".join(f"<tr>{r}</tr>" for r in rows) or f'<tr><td colspan="{len(headers or [1])}">none</td></tr>'
    return f'<div class="pg-scroll"><table class="pg-table">{head}<tbody>{body}</tbody></table></div>'
