"""An interactive timeline of one step, as a self-contained HTML fragment.

The same lanes as :mod:`profiling_guide.pages.timeline` draws with matplotlib (CPU
ops by nesting depth, CUDA runtime calls, one lane per GPU stream), drawn in
the browser on a ``<canvas>`` so a reader can zoom into a 2 µs kernel inside a
50 ms step. Drag pans; the mouse wheel zooms once the timeline has been
clicked (or with Ctrl held, so scrolling the page is never captured by
surprise); a double-click resets. Hovering a bar (tapping it, on a touch
screen) shows its decoded kernel name, the raw name, its duration in µs and,
for a kernel, the op that launched it and how long it waited in the queue; the
launch and the kernel are outlined together.

Everything the fragment needs is inline (data as JSON, the script, the
styles): it works in a page opened from disk, offline, and in a
sphinx-gallery output cell (:class:`InteractiveTimeline` has ``_repr_html_``).
Perfetto's embedding needs its hosted UI, which an offline page cannot reach.
"""

from __future__ import annotations

import hashlib
import html
import itertools
import json
import re

from profiling_guide.analysis.trace_report import choose_step, report_steps
from profiling_guide.pages.palette import ANNOTATION_COLOR, KIND_COLORS, OP_COLORS, RUNTIME_COLOR, short_op
from profiling_guide.trace.model import Step, Trace

_TITLE_MAX = 400  # characters of a raw kernel name kept for the tooltip (C++ names run to thousands)
_ids = itertools.count()


def _dims(op) -> str:
    dims = op.input_dims
    if not dims or not any(dims):
        return ""
    return "Input Dims " + json.dumps(dims, separators=(",", ":"))[:200]


def _by_thread(items) -> dict:
    """``items`` (CPU ops or runtime calls) by thread id, threads in order of first appearance."""
    found: dict = {}
    for item in items:
        found.setdefault(item.tid, []).append(item)
    return found


def _device_info(ev) -> str:
    """A device event's hover line: kind and library, who launched it, grid and block."""
    k = ev.decoded
    call = ev.launch
    where = ""
    if call is not None:
        op = call.op.name if call.op is not None else "no op"
        where = f"launched by {op} via {call.name}"
    return " · ".join(x for x in (f"{k.kind} · {k.library}", where,
                                  f"grid {'×'.join(map(str, ev.grid))}" if ev.grid else "",
                                  f"block {'×'.join(map(str, ev.block))}" if ev.block else "") if x)


def _stream_order(key):  # streams by number, where they are numbers
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in key)


class _Lanes:
    """Lanes of one or more steps on one time axis, sharing the string and colour tables.

    Bars hold absolute times until :meth:`data` puts them on the axis, which
    starts at the earliest step start added: steps can be added one at a
    time, each trace dropped before the next is read.
    """

    def __init__(self):
        self.start = self.end = None
        self.strings: dict[str, int] = {}
        self.colors: dict[str, int] = {}
        self.links: dict[int, int] = {}
        self.lanes: list[dict] = []

    def sid(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def cid(self, color: str) -> int:
        return self.colors.setdefault(color, len(self.colors))

    def bar(self, start, dur, label, title, color, link=-1, info="", shift=0.0):
        if len(title) > _TITLE_MAX:
            title = title[: _TITLE_MAX - 1] + "…"
        return [start - shift, round(dur, 3), self.sid(label), self.sid(title), self.cid(color), link, self.sid(info)]

    def add(self, step: Step, *, prefix: str = "", shift: float = 0.0, max_depth: int | None = None,
            runtime: bool = True) -> None:
        """Add ``step``'s lanes: CPU ops by depth (down to ``max_depth``), runtime calls, GPU streams.

        ``shift`` is subtracted from every time (a rank's clock offset);
        ``prefix`` starts every lane's label (``"r3 "``).
        """
        self._widen(step, shift)
        ops_by_thread = _by_thread(step.ops)
        calls_by_thread = _by_thread(step.runtime_calls)
        threads = list(dict.fromkeys([*ops_by_thread, *calls_by_thread]))
        named = len(threads) > 1  # name the thread only when there is more than one
        for tid in threads:
            # Short labels fit the narrow gutter of a phone; the legend says what dN and tN mean.
            cpu = f"CPU t{tid}" if named else "CPU"
            self.lanes += [{"label": f"{prefix}{cpu} d{d}", "kind": "cpu", "bars": bars}
                           for d, bars in self._cpu_bars(ops_by_thread.get(tid, []), max_depth, shift)]
        for tid in threads if runtime else ():
            calls = self._runtime_bars(calls_by_thread.get(tid, []), shift)
            if calls:
                label = f"runtime t{tid}" if named else "CUDA runtime"
                self.lanes.append({"label": prefix + label, "kind": "runtime", "bars": calls})
        self._add_streams(step, prefix, shift, runtime)

    def _widen(self, step: Step, shift: float) -> None:
        """Stretch the axis to hold ``step`` and its device work."""
        end = max([step.end_us, *(ev.end_us for ev in step.device_events)]) - shift
        self.start = step.start_us - shift if self.start is None else min(self.start, step.start_us - shift)
        self.end = end if self.end is None else max(self.end, end)

    def _cpu_bars(self, ops: list, max_depth: int | None, shift: float) -> list[tuple[int, list]]:
        """One thread's CPU ops as bars, by depth below its outermost op (down to ``max_depth``), shallowest first."""
        base = min((op.depth for op in ops), default=0)
        by_depth: dict[int, list] = {}
        for op in ops:
            depth = op.depth - base
            if max_depth is not None and depth > max_depth:
                continue
            color = ANNOTATION_COLOR if op.annotation else OP_COLORS[min(depth, len(OP_COLORS) - 1)]
            kind = "annotation (record_function)" if op.annotation else "CPU op"
            info = " · ".join(x for x in (kind, _dims(op)) if x)
            by_depth.setdefault(depth, []).append(self.bar(op.start_us, op.dur_us, short_op(op.name), op.name, color,
                                                           info=info, shift=shift))
        return sorted(by_depth.items())

    def _runtime_bars(self, calls: list, shift: float) -> list[list]:
        """One thread's runtime calls as bars, each launch given a link to the device work it started."""
        bars = []
        for call in calls:
            link = self.links.setdefault(id(call), len(self.links)) if call.device_events else -1
            op = call.op.name if call.op is not None else "no op"
            bars.append(self.bar(call.start_us, call.dur_us, call.name, call.name, RUNTIME_COLOR, link,
                                 f"runtime call · from {op}", shift=shift))
        return bars

    def _add_streams(self, step: Step, prefix: str, shift: float, runtime: bool) -> None:
        """One lane per GPU stream (and device, where there are several), streams in number order."""
        streams: dict = {}
        for ev in step.device_events:
            k = ev.decoded
            call = ev.launch
            link = self.links.get(id(call), -1) if call is not None and runtime else -1
            key = (str(ev.args.get("device")), str(ev.stream))
            streams.setdefault(key, []).append(self.bar(ev.start_us, ev.dur_us, k.short, ev.name,
                                                        KIND_COLORS.get(k.kind, KIND_COLORS["other"]), link,
                                                        _device_info(ev), shift=shift))
        many_devices = len({d for d, _ in streams}) > 1
        for (device, stream), bars in sorted(streams.items(), key=lambda kv: _stream_order(kv[0])):
            label = f"GPU {device} stream {stream}" if many_devices else f"GPU stream {stream}"
            self.lanes.append({"label": prefix + label, "kind": "gpu", "bars": bars})

    def data(self) -> dict:
        t0 = self.start or 0.0
        for lane in self.lanes:
            for b in lane["bars"]:
                b[0] = round(b[0] - t0, 3)
        return {"span": round((self.end or t0) - t0, 3), "strings": list(self.strings), "colors": list(self.colors),
                "lanes": self.lanes}


def timeline_data(step: Step) -> dict:
    """The lanes of ``step`` as JSON-ready data (what the fragment's script draws).

    ``{"span": µs, "strings": [...], "colors": [...], "lanes": [{"label", "kind",
    "bars": [[start_us, dur_us, label, title, color, link, info], ...]}]}``:
    times are µs from the step's start; label, title and info index
    ``strings`` (names repeat, so each is stored once); ``link`` pairs a
    launch with the device work it started (-1: none).
    """
    lanes = _Lanes()
    lanes.add(step)
    return lanes.data()


class RanksTimeline:
    """One step of several ranks stacked on one time axis, added one rank at a time.

    Each rank gets its CPU ops down to nesting depth ``max_depth`` (by
    default the outermost: the ``record_function`` labels) and one lane per
    GPU stream, every lane labelled with the rank's label; runtime calls are
    left out to keep the stack short. :meth:`add` takes a clock ``shift``
    subtracted from the rank's times (its clock's offset from the first
    rank's, where the ranks ran on hosts whose clocks differ).
    """

    def __init__(self, *, max_depth: int = 0):
        self._lanes = _Lanes()
        self.max_depth = max_depth

    def add(self, label: str, step: Step, shift: float = 0.0) -> None:
        self._lanes.add(step, prefix=f"{label} ", shift=shift, max_depth=self.max_depth, runtime=False)

    def data(self) -> dict:
        """The lanes as :func:`timeline_data` gives them, for :func:`timeline_html`."""
        return self._lanes.data()


def _legend(data: dict) -> str:
    kinds = {}
    for lane in data["lanes"]:
        if lane["kind"] == "gpu":
            for b in lane["bars"]:
                kinds[data["colors"][b[4]]] = True
    names = {color: kind for kind, color in KIND_COLORS.items()}
    items = [(KIND_COLORS.get(names[c], c), names[c]) for c in kinds if c in names]
    items += [(OP_COLORS[0], "CPU op"), (ANNOTATION_COLOR, "record_function"), (RUNTIME_COLOR, "runtime call")]
    threads = any("CPU t" in lane["label"] for lane in data["lanes"])
    note = "CPU dN: ops at nesting depth N" + (" · tN: thread N" if threads else "")
    return ("".join(f'<span><i style="background:{c}"></i>{html.escape(label)}</span>' for c, label in items)
            + f'<span class="pg-itl-note">{html.escape(note)}</span>')


# Characters that may end or change a <script> element's content, or a JavaScript string, in an HTML page:
# written as \u escapes, which JSON.parse reads back as the same characters.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                "\u2028": "\\u2028", "\u2029": "\\u2029"})
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_in_script(data) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``.

    ``<``, ``>`` and ``&`` are written as ``\\u003c``, ``\\u003e`` and
    ``\\u0026``, so no ``</script>``, ``<!--`` or ``<script`` from a name in a
    trace survives to end the element early or switch the parser into a
    script-data state that swallows the rest of the page; U+2028 and U+2029
    too, which older JavaScript parsers take for line ends. A lone surrogate
    (valid JSON, not encodable as UTF-8) becomes U+FFFD.
    """
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return _LONE_SURROGATE.sub("\ufffd", text.translate(_SCRIPT_UNSAFE))


def timeline_html(step: Step | dict, *, caption: str | None = None) -> str:
    """An HTML fragment (``<div>`` + inline script and styles) with the interactive timeline of ``step``.

    ``step`` may also be lanes already made (:meth:`RanksTimeline.data`).
    """
    data = step if isinstance(step, dict) else timeline_data(step)
    payload = json_in_script(data)
    uid = f"pg-itl-{hashlib.sha1(payload.encode()).hexdigest()[:8]}-{next(_ids)}"
    cap = f'<div class="pg-itl-caption">{html.escape(caption)}</div>' if caption else ""
    return (
        f"<style>{_CSS}</style>"
        f'<div class="pg-itl" id="{uid}">{cap}'
        '<div class="pg-itl-bar"><button type="button" data-act="in" aria-label="zoom in">+</button>'
        '<button type="button" data-act="out" aria-label="zoom out">−</button>'
        '<button type="button" data-act="reset">reset</button>'
        f'<span class="pg-itl-hint" data-touch="{_HINT_TOUCH}">{_HINT_MOUSE}</span></div>'
        f'<div class="pg-itl-legend">{_legend(data)}</div>'
        '<canvas tabindex="0" role="img" aria-label="timeline of one step: CPU ops, runtime calls, GPU streams">'
        "</canvas>"
        '<div class="pg-itl-tip" hidden></div>'
        f'<script type="application/json">{payload}</script></div>'
        f'<script>{_JS}\nwindow.pgTimeline(document.getElementById("{uid}"));</script>'
    )


class InteractiveTimeline:
    """One step of a trace as an interactive timeline; renders itself in notebooks and gallery pages.

    ``step`` is a ProfilerStep number; by default the step of median length
    (a trace without ProfilerStep markers is one step).
    """

    def __init__(self, trace: Trace, step: int | None = None, *, caption: str | None = None):
        self.step = choose_step(report_steps(trace), step)
        self.caption = caption

    def _repr_html_(self) -> str:
        return timeline_html(self.step, caption=self.caption)

    def __repr__(self) -> str:
        return f"InteractiveTimeline(step {self.step.number}: {len(self.step.device_events)} device events)"


class RanksStep:
    """One profiled step of every rank of a job, stacked on one time axis; renders itself on a page.

    ``paths``: the ranks' traces, in rank order; ``step``: a ProfilerStep
    number every rank has (default: the first). ``offsets_us`` shifts each
    rank's clock (a run analysis's ``offsets_us``, for ranks on several hosts).
    """

    def __init__(self, paths, step: int | None = None, *, offsets_us: dict | None = None,
                 caption: str | None = None):
        timeline = RanksTimeline()
        for rank, path in enumerate(paths):
            trace = Trace.load(path)
            chosen = next((s for s in trace.steps if step is None or s.number == step), None)
            if chosen is not None:
                timeline.add(f"r{rank}", chosen, (offsets_us or {}).get(rank, 0.0))
        self.data, self.caption = timeline.data(), caption

    def _repr_html_(self) -> str:
        return timeline_html(self.data, caption=self.caption)

    def __repr__(self) -> str:
        return f"RanksStep({len(self.data['lanes'])} lanes)"


# The script swaps in the touch hint where the primary pointer cannot hover (a phone, a tablet).
_HINT_MOUSE = "drag to pan · click, then scroll to zoom (or Ctrl+scroll) · double-click to reset · hover for names"
_HINT_TOUCH = "tap a bar for its details · drag sideways to pan · + and − zoom"

_CSS = """
.pg-itl{position:relative;margin:.4em 0 1.2em;font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1b1b1b}
.pg-itl canvas{display:block;width:100%;touch-action:pan-y;cursor:grab;border:1px solid #d8dce3;border-radius:4px;
background:#fff}
.pg-itl canvas:focus{outline:2px solid #7b9ccf;outline-offset:1px}
.pg-itl-bar{display:flex;flex-wrap:wrap;gap:.4em;align-items:center;margin-bottom:.3em}
.pg-itl-bar button{font:inherit;min-width:2em;padding:0 .6em;border:1px solid #c5cad3;background:#f6f7f9;
border-radius:3px;cursor:pointer;color:inherit}
.pg-itl-hint{color:#5f6368;font-size:12px}
.pg-itl-caption{font-weight:600;margin-bottom:.2em}
.pg-itl-legend{margin-bottom:.3em}
.pg-itl-legend span{display:inline-block;margin-right:.9em;font-size:12px;white-space:nowrap}
.pg-itl-legend .pg-itl-note{color:#5f6368}
.pg-itl-legend i{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-1px;border-radius:2px}
.pg-itl-tip{position:fixed;z-index:1000;max-width:min(440px,calc(100vw - 16px));background:#fff;border:1px solid #b9bec7;
border-radius:4px;box-shadow:0 2px 10px rgba(0,0,0,.15);padding:.4em .6em;font-size:12px;pointer-events:none;
overflow-wrap:anywhere}
.pg-itl-tip b{display:block}
.pg-itl-tip code{display:block;font-size:11px;color:#444;margin:.2em 0}
"""

_JS = r"""
(function () {
  if (window.pgTimeline) return;
  var LANE = 20, AXIS = 22, FONT = "11px system-ui, sans-serif", CHAR = 6.1;
  function fmt(us) {
    var a = Math.abs(us);
    return a >= 100 ? us.toFixed(0) : a >= 10 ? us.toFixed(1) : a >= 1 ? us.toFixed(2) : us.toFixed(3);
  }
  function niceStep(range, px) {
    var raw = range / Math.max(px / 90, 1), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return p * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
  }
  function dark(hex) {
    var n = parseInt(hex.slice(1), 16), r = n >> 16, g = (n >> 8) & 255, b = n & 255;
    return 0.299 * r + 0.587 * g + 0.114 * b < 150;
  }
  function clip(text, px) {
    var n = Math.floor(px / CHAR);
    return text.length <= n ? text : n > 1 ? text.slice(0, n - 1) + "\u2026" : "";
  }
  window.pgTimeline = function (root) {
    var data = JSON.parse(root.querySelector('script[type="application/json"]').textContent);
    var canvas = root.querySelector("canvas"), tip = root.querySelector(".pg-itl-tip");
    var ctx = canvas.getContext("2d"), S = data.strings, lanes = data.lanes, span = data.span || 1;
    var view = [0, span], width = 0, placed = null, gutter = 150, hover = null, drag = null, focused = false;
    var isDark = data.colors.map(dark), links = {};
    lanes.forEach(function (lane, li) {
      lane.bars.forEach(function (b, bi) { if (b[5] >= 0) (links[b[5]] = links[b[5]] || []).push([li, bi]); });
    });
    function plotW() { return Math.max(width - gutter - 8, 10); }
    function X(t) { return gutter + (t - view[0]) / (view[1] - view[0]) * plotW(); }
    function T(px) { return view[0] + (px - gutter) / plotW() * (view[1] - view[0]); }
    function height() { return AXIS + Math.max(lanes.length, 1) * LANE + 4; }
    function resize() {
      var shown = canvas.clientWidth || root.clientWidth;
      if (shown === width && canvas.width === Math.round(width * (window.devicePixelRatio || 1))) return;
      width = shown;
      gutter = width < 560 ? 92 : 150;
      var dpr = window.devicePixelRatio || 1;
      canvas.style.height = height() + "px";
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height() * dpr);
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      draw();
    }
    function partners(h) {
      var b = lanes[h[0]].bars[h[1]];
      return b[5] >= 0 ? links[b[5]] : [h];
    }
    function draw() {
      var h = height(), r = view[1] - view[0];
      ctx.clearRect(0, 0, width, h);
      ctx.font = FONT;
      ctx.textBaseline = "middle";
      lanes.forEach(function (lane, li) {
        ctx.fillStyle = li % 2 ? "#f6f7f9" : "#ffffff";
        ctx.fillRect(0, AXIS + li * LANE, width, LANE);
      });
      // Ticks in ms once they are 1000 µs apart or more: five-digit µs labels run into each other.
      var step = niceStep(r, plotW()), ms = step >= 1000, unit = ms ? " ms" : " \u00b5s";
      var digits = Math.max(0, -Math.floor(Math.log10(ms ? step / 1000 : step) + 1e-9));
      ctx.strokeStyle = "#e3e6eb";
      ctx.fillStyle = "#5f6368";
      ctx.textAlign = "center";
      for (var t = Math.ceil(view[0] / step) * step; t <= view[1]; t += step) {
        var x = X(t);
        ctx.beginPath(); ctx.moveTo(x + 0.5, AXIS - 4); ctx.lineTo(x + 0.5, h); ctx.stroke();
        ctx.fillText((Math.abs(t) < step / 2 ? "0" : (ms ? t / 1000 : t).toFixed(digits)) + unit, x, AXIS / 2);
      }
      ctx.save();
      ctx.beginPath(); ctx.rect(gutter, 0, width - gutter, h); ctx.clip();
      ctx.textAlign = "left";
      lanes.forEach(function (lane, li) {
        var y = AXIS + li * LANE;
        lane.bars.forEach(function (b) {
          if (b[0] + b[1] < view[0] || b[0] > view[1]) return;
          var x0 = X(b[0]), w = Math.max(X(b[0] + b[1]) - x0, 1);
          ctx.fillStyle = data.colors[b[4]];
          ctx.fillRect(x0, y + 3, w, LANE - 6);
          if (w > 28) {
            var left = Math.max(x0, gutter), label = clip(S[b[2]], x0 + w - left - 6);
            if (label) {
              ctx.fillStyle = isDark[b[4]] ? "#ffffff" : "#1b1b1b";
              ctx.fillText(label, left + 3, y + LANE / 2);
            }
          }
        });
      });
      if (hover) {
        var pts = partners(hover).map(function (p) {
          var b = lanes[p[0]].bars[p[1]], x0 = X(b[0]), w = Math.max(X(b[0] + b[1]) - x0, 1), y = AXIS + p[0] * LANE;
          ctx.strokeStyle = "#111111"; ctx.lineWidth = 2; ctx.strokeRect(x0 - 1, y + 2, w + 2, LANE - 4);
          return [x0, y, lanes[p[0]].kind];
        });
        var from = pts.filter(function (p) { return p[2] === "runtime"; })[0];
        if (from) {
          ctx.lineWidth = 1; ctx.strokeStyle = "#555555";
          pts.forEach(function (p) {
            if (p[2] !== "gpu") return;
            ctx.beginPath(); ctx.moveTo(from[0], from[1] + LANE - 3); ctx.lineTo(p[0], p[1] + 3); ctx.stroke();
          });
        }
      }
      ctx.restore();
      ctx.fillStyle = "#ffffff"; ctx.fillRect(0, AXIS, gutter - 2, h - AXIS);
      ctx.fillStyle = "#1b1b1b"; ctx.textAlign = "left";
      lanes.forEach(function (lane, li) {
        ctx.fillText(clip(lane.label, gutter - 10), 4, AXIS + li * LANE + LANE / 2);
      });
      if (!lanes.length) { ctx.fillText("no events in this step", gutter + 8, AXIS + LANE / 2); }
      root.dataset.view = view[0].toFixed(3) + "," + view[1].toFixed(3);
    }
    function hit(px, py) {
      var li = Math.floor((py - AXIS) / LANE);
      if (li < 0 || li >= lanes.length || px < gutter) return null;
      var t = T(px), tol = 3 * (view[1] - view[0]) / plotW(), best = -1, bars = lanes[li].bars;
      for (var i = 0; i < bars.length; i++) {
        var b = bars[i];
        if (b[0] - tol <= t && t <= b[0] + b[1] + tol && (best < 0 || b[1] < bars[best][1])) best = i;
      }
      return best < 0 ? null : [li, best];
    }
    function line(parent, tag, text) {
      var el = document.createElement(tag);
      el.textContent = text;
      parent.appendChild(el);
    }
    // The tip is fixed to the viewport, placed from the pointer's client coordinates:
    // the output box around the timeline scrolls and would clip anything absolute.
    function showTip(h, cx, cy) {
      var lane = lanes[h[0]], b = lane.bars[h[1]];
      tip.textContent = "";
      line(tip, "b", S[b[2]]);
      if (S[b[3]] !== S[b[2]]) line(tip, "code", S[b[3]]);
      line(tip, "div", "start " + fmt(b[0]) + " \u00b5s \u00b7 duration " + fmt(b[1]) + " \u00b5s");
      if (S[b[6]]) line(tip, "div", S[b[6]]);
      if (b[5] >= 0) {
        var others = links[b[5]].filter(function (p) { return p[0] !== h[0] || p[1] !== h[1]; });
        if (lane.kind === "gpu") {
          others.forEach(function (p) {
            if (lanes[p[0]].kind !== "runtime") return;
            line(tip, "div", "launch \u2192 start " + fmt(b[0] - lanes[p[0]].bars[p[1]][0]) + " \u00b5s");
          });
        } else {
          line(tip, "div", "started " + others.length + " piece(s) of device work");
        }
      }
      tip.hidden = false;
      var doc = document.documentElement;  // the viewport less its scrollbars, even where content overflows it
      var vw = Math.min(doc.clientWidth, window.innerWidth), vh = Math.min(doc.clientHeight, window.innerHeight);
      var w = tip.offsetWidth, th = tip.offsetHeight, top = cy + 16;
      if (top + th > vh - 4) top = Math.max(cy - th - 12, 4);  // no room below the pointer: above it
      placed = {left: Math.max(Math.min(cx + 14, vw - w - 4), 4), top: top, x: window.scrollX, y: window.scrollY};
      moveTip();
    }
    function moveTip() {  // with the page: a scroll carries the bar, and its tip, along
      tip.style.left = placed.left - (window.scrollX - placed.x) + "px";
      tip.style.top = placed.top - (window.scrollY - placed.y) + "px";
    }
    function hideTip() { hover = null; tip.hidden = true; }
    function setView(a, b) {
      var r = Math.max(b - a, 0.01), pad = span * 0.05;
      if (r > span + 2 * pad) { a = -pad; r = span + 2 * pad; }
      a = Math.min(Math.max(a, -pad), span + pad - r);
      view = [a, a + r];
      draw();
    }
    function zoom(f, px) {
      var t = T(px === undefined ? gutter + plotW() / 2 : px);
      setView(t - (t - view[0]) * f, t + (view[1] - t) * f);
    }
    function reset() { view = [0, span]; draw(); }
    canvas.addEventListener("pointerdown", function (e) {
      focused = true;
      drag = {x: e.offsetX, v: view.slice(), moved: false, touch: e.pointerType !== "mouse"};
      canvas.setPointerCapture(e.pointerId);
      canvas.style.cursor = "grabbing";
    });
    canvas.addEventListener("pointermove", function (e) {
      if (drag) {
        var dt = (e.offsetX - drag.x) / plotW() * (drag.v[1] - drag.v[0]);
        if (Math.abs(e.offsetX - drag.x) > 2) drag.moved = true;
        if (drag.moved) { hideTip(); setView(drag.v[0] - dt, drag.v[1] - dt); return; }
      }
      if (e.pointerType === "mouse") point(e);
    });
    function point(e) {  // show the bar under the pointer, or hide the tip
      var h = hit(e.offsetX, e.offsetY);
      var same = h && hover && h[0] === hover[0] && h[1] === hover[1];
      hover = h;
      if (h) showTip(h, e.clientX, e.clientY); else tip.hidden = true;
      if (!same) draw();
    }
    // A finger cannot hover: a tap (a touch that did not pan) shows the bar it landed on.
    canvas.addEventListener("pointerup", function (e) {
      if (drag && drag.touch && !drag.moved) point(e);
      drag = null; canvas.style.cursor = "";
    });
    canvas.addEventListener("pointercancel", function () { drag = null; canvas.style.cursor = ""; });
    // Touch pointers "leave" as the finger lifts: only a mouse leaving hides the tip.
    canvas.addEventListener("pointerleave", function (e) { if (!drag && e.pointerType === "mouse") { hideTip(); draw(); } });
    // A fixed tip would stay put while the page moves under it.
    window.addEventListener("scroll", function () { if (!tip.hidden) moveTip(); }, {passive: true});
    canvas.addEventListener("wheel", function (e) {
      if (!focused && !e.ctrlKey) return;
      e.preventDefault();
      zoom(Math.exp(e.deltaY * 0.0015), e.offsetX);
    }, {passive: false});
    canvas.addEventListener("dblclick", reset);
    canvas.addEventListener("blur", function () { focused = false; });
    canvas.addEventListener("keydown", function (e) {
      var r = view[1] - view[0], k = e.key;
      if (k === "+" || k === "=") zoom(0.7); else if (k === "-" || k === "_") zoom(1 / 0.7);
      else if (k === "0") reset(); else if (k === "ArrowLeft") setView(view[0] - r * 0.2, view[1] - r * 0.2);
      else if (k === "ArrowRight") setView(view[0] + r * 0.2, view[1] + r * 0.2); else return;
      e.preventDefault();
    });
    root.querySelectorAll("button[data-act]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var act = btn.getAttribute("data-act");
        if (act === "in") zoom(0.5); else if (act === "out") zoom(2); else reset();
      });
    });
    // Redraw at the displayed size whenever it changes (the page's layout settles after this
    // script runs; a window resize or a phone's rotation changes it again): a canvas drawn
    // at any other size is scaled by the browser, and blurs.
    if (window.ResizeObserver) new ResizeObserver(function () { resize(); }).observe(canvas);
    else window.addEventListener("resize", resize);
    var hint = root.querySelector(".pg-itl-hint");
    if (hint && window.matchMedia && matchMedia("(hover: none)").matches) hint.textContent = hint.dataset.touch;
    root.pgTimeline = {
      view: function () { return view.slice(); },
      barCenter: function (li, bi) {
        var b = lanes[li].bars[bi];
        return [X(b[0] + b[1] / 2), AXIS + li * LANE + LANE / 2];
      }
    };
    resize();
  };
})();
"""
