"""Two traces' op trees lined up, node by node, the way TraceLens's TraceDiff does.

A step's *tree* holds every op that launched device work or holds an op that
did, nested as the trace nests them, with three changes that make two
programs' trees comparable:

* ``torch.compile``'s own wrappers (``Torch-Compiled Region``,
  ``CompiledFunction``, ``## Call CompiledFxGraph … ##``, the autograd
  engine's ``CompiledFunctionBackward``) are left out: their children take
  their place, so a compiled graph's ops sit where eager's did;
* the autograd engine's work (its thread's ``evaluate_function`` ops) sits
  under one node, ``autograd engine``, and, for a run of several ranks, each
  rank's tree under ``rank N``.

:func:`align` matches two trees from their roots down: the children of two
matched nodes are lined up by edit distance on their names (Wagner–Fischer,
as TraceLens does), and each matched pair is lined up in turn. Two ops of one
name still match where what else the traces say of them differs, at a cost:
their recorded input shapes, and, where both traces recorded them, the
module path they ran in (``with_modules=True``) and the program's function
that called them (``with_stack=True``; :mod:`~profiling_guide.trace.python_context`).
Where one side's ``aten::linear`` could match either of two on the other
side, the one that agrees on more wins. A node is
named by its *position*, the path of ``(name, k)`` pairs from the root (the
k-th child of that name), which is the same in every step of one program: the
alignment of one step of each side holds for all their steps, and an event's
*place* (:func:`place_of`) is the deepest position above it that the two
sides share. What differs below a shared node is matched there, at the
lowest parent the two have in common.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from profiling_guide.trace.model import CpuOp, DeviceEvent, Step
from profiling_guide.trace.python_context import Context

#: ``torch.compile``'s wrappers around a compiled graph: not part of the program's own tree.
TRANSPARENT = re.compile(r"^(## .* ##$|Torch-Compiled Region|CompiledFunction(Backward)?$|TorchDynamo Cache Lookup"
                         r"|autograd::engine::evaluate_function: CompiledFunctionBackward)")
ENGINE_PREFIX = "autograd::engine::evaluate_function"
ENGINE = "autograd engine"
#: torch.compile's wrapper module (``OptimizedModule``) is left out of module paths, like its other wrappers.
WRAPPER_MODULE = re.compile(r"^OptimizedModule_\d+$")
#: Above this many cells (children of one node × children of the other) the edit distance is too slow in
#: Python: those children are lined up by difflib's longest matching blocks instead.
MAX_CELLS = 2_000_000

Position = tuple  # ((name, k), ...) from the root


@dataclass(eq=False)
class Node:
    name: str
    start: float
    children: list[Node] = field(default_factory=list)
    position: Position = ()
    #: what else the trace says of an op: its input shapes, module path, calling function (None: not recorded)
    detail: tuple = (None, None, None)


@dataclass
class StepTree:
    """One step's tree (see the module docstring), and the node of each op in it."""

    root: Node
    node_of: dict  # CpuOp -> Node


def modules_of(context: Context | None) -> tuple[str, ...]:
    return tuple(m for m in (context.modules if context is not None else ()) if not WRAPPER_MODULE.match(m))


def step_tree(steps: list[tuple[Step, str | None]], contexts: dict) -> StepTree:
    """The tree of one step (or of the same step of several ranks: ``(step, "rank N")`` pairs)."""
    root = Node("", 0.0)
    node_of: dict = {}
    by_key: dict = {}  # (parent node, key) -> node: one node per op, one per module call under one parent

    def child(parent: Node, key, name: str, start: float, detail: tuple = (None, None, None)) -> Node:
        node = by_key.get((id(parent), key))
        if node is None:
            node = by_key[(id(parent), key)] = Node(name, start, detail=detail)
            parent.children.append(node)
        node.start = min(node.start, start)
        return node

    def node_for(op: CpuOp, top: Node) -> Node:
        if op in node_of:
            return node_of[op]
        parent_op = op.parent
        while parent_op is not None and (TRANSPARENT.match(parent_op.name) or parent_op.name.startswith("ProfilerStep#")):
            parent_op = parent_op.parent
        if parent_op is None:
            parent = child(top, ENGINE, ENGINE, op.start_us) if _on_engine(op) else top
        else:
            parent = node_for(parent_op, top)
        if TRANSPARENT.match(op.name):
            node_of[op] = parent
            return parent
        ctx = contexts.get(op)
        detail = (str(op.input_dims) if op.input_dims else None, modules_of(ctx) or None,
                  ctx.source if ctx is not None else None)
        node = node_of[op] = child(parent, op, op.name, op.start_us, detail)
        return node

    for step, group in steps:
        top = child(root, ("rank", group), group, step.start_us) if group is not None else root
        for ev in step.device_events:
            op = ev.launch.op if ev.launch is not None else None
            if op is not None:
                node_for(op, top)
    _number(root, ())
    return StepTree(root, node_of)


def _on_engine(op: CpuOp) -> bool:
    return op.name.startswith(ENGINE_PREFIX)


def _number(node: Node, position: Position) -> None:
    node.position = position
    node.children.sort(key=lambda n: n.start)
    seen: dict[str, int] = {}
    for c in node.children:
        k = seen.get(c.name, 0)
        seen[c.name] = k + 1
        _number(c, (*position, (c.name, k)))


def position_of(tree: StepTree, ev: DeviceEvent) -> Position:
    """The position of the node that launched ``ev`` (the root's, ``()``, when no op launched it)."""
    op = ev.launch.op if ev.launch is not None else None
    node = tree.node_of.get(op) if op is not None else None
    return node.position if node is not None else ()


# -------------------------------------------------------------- matching
def _cost(x: Node, y: Node) -> float:
    """:data:`SAME` where the names agree and so does all else both nodes recorded, :data:`NAME_ONLY` where only
    the names agree, :data:`OTHER` where they do not."""
    if x.name != y.name:
        return OTHER
    if any(p is not None and q is not None and p != q for p, q in zip(x.detail, y.detail)):  # noqa: B905 (details of different lengths compare on what both have)
        return NAME_ONLY
    return SAME


def _pairs(a: list[Node], b: list[Node]) -> list[tuple[int, int]]:
    """The index pairs of same-named nodes that an edit-distance alignment of ``a`` and ``b`` keeps."""
    def same(x: Node, y: Node) -> bool:
        return _cost(x, y) == SAME

    head = 0
    while head < min(len(a), len(b)) and same(a[head], b[head]):
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and same(a[-1 - tail], b[-1 - tail]):
        tail += 1
    pairs = [(i, i) for i in range(head)]
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    if mid_a and mid_b:
        if len(mid_a) * len(mid_b) > MAX_CELLS:
            blocks = difflib.SequenceMatcher(None, [n.name for n in mid_a], [n.name for n in mid_b],
                                             autojunk=False).get_matching_blocks()
            pairs += [(head + m.a + i, head + m.b + i) for m in blocks for i in range(m.size)]
        else:
            pairs += [(head + i, head + j) for i, j in _wagner_fischer(mid_a, mid_b)]
    pairs += [(len(a) - tail + i, len(b) - tail + i) for i in range(tail)]
    return pairs


#: The cost of matching two nodes: free when their names and all else agree, half a step when only their names do
#: (a pairing that agrees on more is preferred), a substitution (neither kept) otherwise.
SAME, NAME_ONLY, OTHER = 0.0, 0.5, 1.0


def _wagner_fischer(a: list[Node], b: list[Node]) -> list[tuple[int, int]]:
    """Levenshtein distance (insertions, deletions and substitutions cost 1; see :data:`NAME_ONLY`); the pairs of
    same-named nodes it keeps."""
    cost = _cost
    m, n = len(a), len(b)
    dist = [[float(j) for j in range(n + 1)]] + [[float(i)] + [0.0] * n for i in range(1, m + 1)]
    for i in range(1, m + 1):
        row, up, x = dist[i], dist[i - 1], a[i - 1]
        for j in range(1, n + 1):
            row[j] = min(up[j] + 1, row[j - 1] + 1, up[j - 1] + cost(x, b[j - 1]))
    pairs = []
    i, j = m, n
    while i > 0 and j > 0:
        c = cost(a[i - 1], b[j - 1])
        if dist[i][j] == dist[i - 1][j - 1] + c:
            if c < OTHER:
                pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif dist[i][j] == dist[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    pairs.reverse()
    return pairs


def align(a: StepTree, b: StepTree) -> dict[Position, Position]:
    """B's position → A's, for every node the two trees share (the roots included)."""
    matched: dict[Position, Position] = {}
    todo = [(a.root, b.root)]
    while todo:
        na, nb = todo.pop()
        matched[nb.position] = na.position
        ca, cb = na.children, nb.children
        for i, j in _pairs(ca, cb):
            todo.append((ca[i], cb[j]))
    return matched


def place_of(position: Position, shared: set[Position] | dict) -> Position:
    """The deepest position at or above ``position`` that is in ``shared`` (the root, ``()``, at worst)."""
    for depth in range(len(position), 0, -1):
        if position[:depth] in shared:
            return position[:depth]
    return ()


def words(position: Position) -> str:
    """A position as the page names it: ``mlp_fwd › aten::linear`` (the k-th of a name marked ``#k`` past the first)."""
    return " › ".join(name + (f" #{k + 1}" if k else "") for name, k in position) or "the step"
