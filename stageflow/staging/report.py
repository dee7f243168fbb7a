"""`stageflow report`: one self-contained HTML page that explains a compile.

`render` reads a `Compilation` that recorded itself (`Compilation(record=True)`, or any
compile while ``STAGEFLOW_REPORT_DIR`` is set): the module after every stage, the pass and
stage timings, the fusion notes of the ``fuse`` pass (`stageflow.passes.fuse.fusion_notes`),
the residuals of staged gradients before and after ``remat``, and the trace history of the
`sf.function` when one is known. The page holds, in order:

- a summary, and a bar chart of where the compile time went (each pass, each stage);
- the traced IR with every op's source line beside it, then the IR after each pass as a
  diff against the stage before it (passes that changed nothing are listed as such);
- every fused kernel: its ops, why its neighbours stayed out of it, its LLVM IR and host
  assembly and (for elementwise kernels) its PTX, behind toggles;
- the buffer plan: each temporary's live range on a timeline, the peak against the
  liveness lower bound;
- the residuals a staged gradient saves, before and after rematerialisation;
- the retrace history; the dataflow graph as SVG (Graphviz's ``dot`` where installed,
  else a layered layout of our own); the source lines the IR points at.

No script, no external resource: one file that any browser opens offline.
"""

from __future__ import annotations

import difflib
import html
import linecache
import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from stageflow.codegen import CPUTarget, PTXTarget
from stageflow.codegen.kernels.analysis import analyse
from stageflow.ir.attributes import decode
from stageflow.ir.types import dtype_of
from stageflow.passes.fuse import is_kernel, kernel_ops, reduced_results
from stageflow.passes.plan_buffers import BUFFER_ATTR, LOWER_BOUND_ATTR, PEAK_ATTR
from stageflow.passes.remat import residual_count

MAX_TIMELINE_ROWS = 200
MAX_GRAPH_NODES = 300
_LOC = re.compile(r'loc\("([^"]+)":(\d+):(\d+)\)')

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:2em}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font:12px/1.35 monospace}
.add{background:#e6ffec}.del{background:#ffebe9}.hunk{color:#888}
.src{color:#777}.src a{color:#36c}table{border-collapse:collapse}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top}
.bar{background:#4a7fd0;height:.9em;display:inline-block}.muted{color:#888}
nav a{margin-right:1em}details{margin:.3em 0}summary{cursor:pointer}
"""


def render(compilation: Any) -> str:
    """The report page of a compilation that recorded its stages."""
    stages: list[tuple[str, str]] = compilation.stages
    module = compilation.module
    parts = [_summary(compilation, module), _timings(compilation), _ir(stages),
             _kernels(module, compilation.fusion_notes), _buffers(module),
             _remat(compilation.residuals), _retraces(compilation.history),
             _graph(compilation.traced_module), _sources(stages)]
    nav = " ".join(f'<a href="#{key}">{title}</a>' for key, title in SECTIONS)
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>stageflow report: {_e(compilation.name)}</title><style>{STYLE}</style>"
            f"</head><body><h1>stageflow report: {_e(compilation.name)}</h1><nav>{nav}</nav>"
            + "".join(parts) + "</body></html>\n")


SECTIONS = [("summary", "Summary"), ("timings", "Timings"), ("ir", "IR and passes"),
            ("kernels", "Kernels"), ("buffers", "Buffer plan"), ("remat", "Remat"),
            ("retraces", "Retraces"), ("graph", "Graph"), ("source", "Source")]


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _section(key: str, body: str) -> str:
    title = dict(SECTIONS)[key]
    return f'<section id="{key}"><h2>{title}</h2>{body}</section>'


def _functions(module: ModuleOp) -> list[FuncOp]:
    return [op for op in module.ops if isinstance(op, FuncOp)]


def _summary(compilation: Any, module: ModuleOp) -> str:
    functions = _functions(module)
    kernels = [f for f in functions if is_kernel(f)]
    peaks = [decode(f.attributes[PEAK_ATTR]) for f in functions if PEAK_ATTR in f.attributes]
    total = sum(compilation.stats.seconds.get(k, 0.0) for k in ("build IR", "optimize", "llvm"))
    rows = [("functions", ", ".join(f"@{f.sym_name.data}" for f in functions
                                    if not is_kernel(f))),
            ("passes", len(compilation.timings)), ("fused kernels", len(kernels)),
            ("peak temporary bytes", ", ".join(f"{p:,}" for p in peaks) or "no plan"),
            ("compile time", f"{total * 1e3:.1f} ms (building IR, passes, LLVM)")]
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return _section("summary", f"<table>{body}</table>")


def _timings(compilation: Any) -> str:
    rows = [(f"pass {t.name}", t.run_s + t.verify_s) for t in compilation.timings]
    rows += [(stage, s) for stage, s in compilation.stats.seconds.items()
             if not stage.startswith("pass ") and stage != "optimize"]
    longest = max((s for _, s in rows), default=0.0) or 1.0
    body = "".join(f'<tr><td>{_e(name)}</td><td>{s * 1e3:.2f} ms</td><td>'
                   f'<span class=bar style="width:{300 * s / longest:.0f}px"></span></td></tr>'
                   for name, s in rows)
    note = ("<p class=muted>Where the first call's time went: building the IR, the passes "
            "(each below), then LLVM: the kernels', lowered ops' and program's IR built in "
            "Python while the compiler thread compiles the modules, then linking.</p>")
    return _section("timings", note + f"<table>{body}</table>")


def _annotated(text: str) -> str:
    """IR text with each op's source line beside it (linked to the Source section)."""
    lines = []
    for line in text.splitlines():
        match = _LOC.search(line)
        shown = _e(_LOC.sub("", line).rstrip()) if match else _e(line)
        if match:
            filename, number = match.group(1), int(match.group(2))
            source = linecache.getline(filename, number).strip()
            anchor = _anchor(filename, number)
            shown += (f' <span class=src>// <a href="#{anchor}">{_e(filename.split("/")[-1])}'
                      f":{number}</a> {_e(source)}</span>")
        lines.append(shown)
    return "<pre>" + "\n".join(lines) + "</pre>"


def _anchor(filename: str, line: int) -> str:
    return "src-" + re.sub(r"[^A-Za-z0-9]", "_", filename) + f"-{line}"


def _diff(before: str, after: str) -> str:
    out = []
    for line in difflib.unified_diff(_strip_locs(before), _strip_locs(after), lineterm="",
                                     n=2):
        if line.startswith(("---", "+++")):
            continue
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        out.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "<pre>" + "\n".join(out) + "</pre>"


def _strip_locs(text: str) -> list[str]:
    return [_LOC.sub("", line).rstrip() for line in text.splitlines()]


def _ir(stages: list[tuple[str, str]]) -> str:
    if not stages:
        return _section("ir", "<p>No stages were recorded.</p>")
    body = [f"<h3>{_e(stages[0][0])}</h3>", _annotated(stages[0][1])]
    for (_, before), (name, after) in zip(stages, stages[1:], strict=False):
        if _strip_locs(before) == _strip_locs(after):
            body.append(f"<p class=muted>after <b>{_e(name)}</b>: no change</p>")
        else:
            body.append(f"<details open><summary>after <b>{_e(name)}</b> (diff against the "
                        f"stage before)</summary>{_diff(before, after)}</details>")
    body.append(f"<details><summary>final IR</summary>{_annotated(stages[-1][1])}</details>")
    return _section("ir", "".join(body))


def _kernels(module: ModuleOp, notes: Sequence[Any]) -> str:
    kernels = [f for f in _functions(module) if is_kernel(f)]
    if not kernels:
        return _section("kernels", "<p>No fused kernels.</p>")
    target = CPUTarget()
    body = []
    for kernel in kernels:
        name = kernel.sym_name.data
        ops = kernel_ops(kernel)
        listing = ", ".join(_e(op) for op in ops)
        why = [n for n in notes if n.kernel == name]
        table = ("<table><tr><th>not fused</th><th>because</th></tr>" + "".join(
            f"<tr><td>{_e(n.neighbour)}</td><td>{_e(n.reason)}</td></tr>" for n in why)
            + "</table>") if why else "<p class=muted>no neighbour was left out</p>"
        analysed = analyse(kernel)
        llvm_ir = target.emit(analysed)
        assembly = target.assembly(analysed)
        if reduced_results(kernel):
            ptx = "; ends in reductions: no PTX (the PTX pipeline keeps reductions apart)"
        else:
            try:
                ptx = PTXTarget().compile(analysed)
            except NotImplementedError as error:
                ptx = f"; no PTX: {error}"
        body.append(
            f'<h3 id="kernel-{_e(name)}">@{_e(name)}</h3><p>{len(ops)} ops: {listing}</p>'
            f"{table}"
            f"<details><summary>LLVM IR</summary><pre>{_e(llvm_ir)}</pre></details>"
            f"<details><summary>assembly (this CPU)</summary><pre>{_e(assembly)}</pre>"
            f"</details><details><summary>PTX (sm_80)</summary><pre>{_e(ptx)}</pre>"
            "</details>")
    return _section("kernels", "".join(body))


def _nbytes(value: Any) -> int:
    ty = value.type
    if not isinstance(ty, TensorType):
        return 0
    count = 1
    for d in ty.get_shape():
        count *= max(d, 1)
    return count * dtype_of(ty.get_element_type()).itemsize


def _buffers(module: ModuleOp) -> str:
    body = []
    for function in _functions(module):
        if is_kernel(function) or PEAK_ATTR not in function.attributes:
            continue
        peak = decode(function.attributes[PEAK_ATTR])
        bound = decode(function.attributes.get(LOWER_BOUND_ATTR)) if (
            LOWER_BOUND_ATTR in function.attributes) else None
        ops = list(function.body.block.ops)
        index = {op: i for i, op in enumerate(ops)}
        rows = []
        for i, op in enumerate(ops):
            if BUFFER_ATTR not in op.attributes:
                continue
            buffers = decode(op.attributes[BUFFER_ATTR])
            buffers = buffers if isinstance(buffers, tuple) else (buffers,)
            for result, buffer in zip(op.results, buffers, strict=False):
                if buffer < 0:
                    continue
                users = [index[u] for u in (_top(use.operation, function)
                                            for use in result.uses) if u in index]
                rows.append((f"%{result.name_hint or i} ({op.name})", buffer, i,
                             max(users, default=i), _nbytes(result)))
        ratio = f", {peak / bound:.2f}x the lower bound" if bound else ""
        body.append(f"<h3>@{_e(function.sym_name.data)}</h3><p>peak {peak:,} bytes; "
                    f"liveness lower bound {bound if bound is None else f'{bound:,}'} "
                    f"bytes{ratio}</p>" + _timeline(rows, len(ops)))
    return _section("buffers", "".join(body) or "<p>No buffer plan (interpreted).</p>")


def _top(op: Operation, function: FuncOp) -> Operation:
    """The op of `function`'s block that holds `op` (itself, or a region op around it)."""
    while op.parent_op() is not None and op.parent_op() is not function:
        op = op.parent_op()
    return op


def _timeline(rows: list[tuple[str, int, int, int, int]], count: int) -> str:
    if not rows:
        return "<p class=muted>no temporaries</p>"
    shown = rows[:MAX_TIMELINE_ROWS]
    width, height, left = 900, 16, 260
    scale = (width - left - 10) / max(count, 1)
    bars = []
    for row, (label, buffer, start, end, nbytes) in enumerate(shown):
        y = row * height
        bars.append(f'<text x="0" y="{y + 12}" font-size="11">{_e(label[:40])}</text>'
                    f'<rect x="{left + start * scale:.1f}" y="{y + 2}" '
                    f'width="{max((end - start + 1) * scale, 2):.1f}" height="{height - 4}" '
                    f'fill="hsl({buffer * 47 % 360},55%,60%)"><title>buffer {buffer}, '
                    f'{nbytes:,} bytes, ops {start}..{end}</title></rect>')
    more = (f"<p class=muted>{len(rows) - len(shown)} more not drawn</p>"
            if len(rows) > len(shown) else "")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{len(shown) * height + 4}">' + "".join(bars) + "</svg>" + more)


def residual_summary(module: ModuleOp) -> list[tuple[str, list[str], int]]:
    """Per forward function of a staged gradient: its residuals' types and their bytes."""
    found = []
    for function in _functions(module):
        count = residual_count(function)
        if not count:
            continue
        returned = function.body.block.last_op
        values = list(returned.operands)[-count:] if returned is not None else []
        found.append((function.sym_name.data, [str(v.type) for v in values],
                      sum(_nbytes(v) for v in values)))
    return found


def _remat(residuals: dict[str, list[tuple[str, list[str], int]]]) -> str:
    if not residuals:
        return _section("remat", "<p>No staged gradient in this compile: nothing to "
                                 "rematerialise.</p>")
    body = []
    for stage, found in residuals.items():
        for name, types, nbytes in found:
            body.append(f"<tr><td>{_e(stage)}</td><td>@{_e(name)}</td><td>{len(types)}</td>"
                        f"<td>{nbytes:,}</td><td>{_e(', '.join(types))}</td></tr>")
    before = sum(n for _, _, n in residuals.get("after inline", []))
    after = sum(n for _, _, n in residuals.get("after remat", []))
    saved = (f"<p>Rematerialisation saves {before - after:,} of {before:,} bytes "
             f"({(before - after) / before:.0%}) of activations.</p>"
             if before and "after remat" in residuals else "")
    return _section("remat", "<table><tr><th>stage</th><th>forward</th><th>residuals</th>"
                             "<th>bytes</th><th>types</th></tr>" + "".join(body) + "</table>"
                             + saved + "<p class=muted>The values the backward reads from the "
                             "forward, before the remat pass (all it needs) and after (what it "
                             "saves; the rest it recomputes).</p>")


def _retraces(history: Sequence[tuple[str, str]]) -> str:
    if not history:
        return _section("retraces", "<p>No trace history (not compiled through an "
                                    "sf.function call).</p>")
    body = "".join(f"<tr><td>{i + 1}</td><td>{_e(signature)}</td><td>{_e(reason)}</td></tr>"
                   for i, (signature, reason) in enumerate(history))
    return _section("retraces", "<table><tr><th>#</th><th>signature</th><th>why traced</th>"
                                f"</tr>{body}</table>")


def _graph(module: ModuleOp | None) -> str:
    function = next((f for f in _functions(module) if not is_kernel(f)), None) if (
        module is not None) else None
    if function is None:
        return _section("graph", "<p>No graph.</p>")
    ops = [op for op in function.body.block.ops][:MAX_GRAPH_NODES]
    index = {op: i for i, op in enumerate(ops)}
    edges = sorted({(index[v.owner], i) for i, op in enumerate(ops) for v in op.operands
                    if v.owner in index})
    dot = shutil.which("dot")
    if dot:
        lines = [f'n{i} [label="{op.name}"];' for i, op in enumerate(ops)]
        lines += [f"n{a} -> n{b};" for a, b in edges]
        text = "digraph G {node [shape=box,fontsize=10];" + "".join(lines) + "}"
        result = subprocess.run([dot, "-Tsvg"], input=text, capture_output=True, text=True,
                                check=False)
        if result.returncode == 0 and "<svg" in result.stdout:
            return _section("graph", result.stdout[result.stdout.index("<svg"):])
    return _section("graph", _layered_svg(ops, edges))


def _layered_svg(ops: list[Operation], edges: list[tuple[int, int]]) -> str:
    """A layered drawing: an op's layer is one more than its deepest operand's."""
    layer = [0] * len(ops)
    for a, b in edges:
        layer[b] = max(layer[b], layer[a] + 1)
    slots: dict[int, int] = {}
    position = []
    for i in range(len(ops)):
        slot = slots.get(layer[i], 0)
        slots[layer[i]] = slot + 1
        position.append((20 + slot * 150, 20 + layer[i] * 50))
    width = 40 + max(slots.values(), default=1) * 150
    height = 60 + max(layer, default=0) * 50
    shapes = [f'<line x1="{position[a][0] + 60}" y1="{position[a][1] + 24}" '
              f'x2="{position[b][0] + 60}" y2="{position[b][1]}" stroke="#999"/>'
              for a, b in edges]
    shapes += [f'<rect x="{x}" y="{y}" width="120" height="24" rx="4" fill="#eef3fb" '
               f'stroke="#4a7fd0"/><text x="{x + 6}" y="{y + 16}" font-size="11">'
               f"{_e(op.name[:18])}</text>" for op, (x, y) in zip(ops, position, strict=True)]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">'
            + "".join(shapes) + "</svg>")


def _sources(stages: list[tuple[str, str]]) -> str:
    seen: dict[tuple[str, int], str] = {}
    for _, text in stages[:1]:
        for filename, line, _ in _LOC.findall(text):
            key = (filename, int(line))
            if key not in seen:
                seen[key] = linecache.getline(filename, int(line)).rstrip()
    if not seen:
        return _section("source", "<p>No source locations.</p>")
    body = "".join(f'<tr id="{_anchor(f, n)}"><td>{_e(f)}:{n}</td><td><code>{_e(text)}'
                   "</code></td></tr>" for (f, n), text in sorted(seen.items()))
    return _section("source", f"<table>{body}</table>")
