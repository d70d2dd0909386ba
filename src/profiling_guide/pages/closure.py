"""What a recording's code reaches in this package: the definitions its closure fingerprint hashes.

A chapter lists the code under study (``code=[FusedGeGLUMLP, fused_mlp.geglu]``)
beside the step it profiles. That code calls more of this package than it
names: ``geglu`` picks a launcher from ``LAUNCHERS``, the launcher runs a
``@triton.jit`` kernel, the kernel calls device helpers of another module.
:func:`reach` follows those names, transitively, and returns every
definition of ``profiling_guide`` they lead to, each as its normalized syntax
tree, so that editing any of them makes the recording stale.

What is followed, from each listed object:

* a **function, class or module of this package** is read from its module's
  source: the top-level statement(s) that define the name, and every name
  they load (in their bodies, decorators, default values and base classes,
  not in type annotations) is looked up in that module: a function, class or
  module-level assignment (a constant, ``LAUNCHERS = {...}``) of the module
  joins the closure; a name imported from another module of this package is
  followed there (``from profiling_guide.kernels.geglu_common import
  tile_coordinates``), also from an import inside a function's body; a dotted
  name (``fused_mlp.geglu``) is followed attribute by attribute through
  modules. A Triton (``@triton.jit``, ``@triton.autotune``) or Gluon
  (``@gluon.jit``) kernel is a decorated function like any other: its body and
  its decorators' arguments (the autotuner's ``CONFIGS``) are read from the
  source, whatever the JIT wrapper does at run time. A listed module is the
  whole module.
* a **function of the page** (the step, defined in ``examples/``) or a nested
  function is read from its own source (``inspect``), and the globals and
  closure variables its code object loads are looked up in the objects they
  name at the time of the fingerprint: this package's functions, classes and
  kernels join the closure (and the attributes its code reads of this
  package's modules: ``fused_mlp.geglu``). An object that is an *instance*
  (``fused = FusedGeGLUMLP(...)``) is not followed: what it is depends on how
  the page built it, which may differ live and in replay; list its class.
* what is **not** followed: third-party code (torch, triton, liger, ...; its
  version is in the run record), the page's other functions that are not
  listed, attribute lookups on values (``self.forward``: a listed class
  brings all its methods anyway), and code another process runs by its
  module's name (``python -m profiling_guide...`` in a string).

What stays fresh and what goes stale: comments, docstrings and layout (line
breaks, parentheses, quotes) are not in the normalized trees, so editing them
never makes a recording stale; nor are argument checks (:func:`without_checks`:
``assert``, an ``if`` whose branch always raises, a bare call of a function
marked :func:`~profiling_guide.errors.argument_check`, which is then not
followed either): they decide whether the work runs, not what the GPU runs.
Any other edit to a reached definition does, behaviour-preserving or not: a
refactor that renames a local, moves an import or splits a loop into a helper
changes the trees, and the recordings that reach that code go stale until
they are recorded again on a GPU. The fingerprint cannot tell such a refactor
from a change; it is built so that a change, a kernel's above all, never goes
unnoticed.

Each definition is serialized from its syntax tree without docstrings and checks (comments
and blank lines are not in a syntax tree), with fields that are empty left out
and an f-string's adjacent text parts merged (so the same code gives the same
text on Python 3.10 to 3.13, whose trees differ in fields added empty and, in
3.12.1, an empty text part in a format spec), keyed by its qualified name
(``profiling_guide.kernels.geglu_kernels:_geglu_dual_gemm_kernel``; a whole
module ends in ``:``), and hashed in the order of those keys.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import inspect
import json
import textwrap
import types
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = "profiling_guide"
PACKAGE_ROOT = Path(__file__).resolve().parents[1]

_WITH_DOCSTRING = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_SKIPPED_FIELDS = frozenset({"ctx", "type_comment", "type_ignores"})
_COMPOUND = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()), *((ast.Match,) if hasattr(ast, "Match") else ()))


# ------------------------------------------------------------------ syntax trees as text
def _is_docstring(stmt: ast.AST) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def normalized(node: ast.AST) -> str:
    """``node``'s syntax tree as text: no docstrings, no positions, no empty fields.

    ``ast.dump`` is close, but its output changes between Python versions
    (3.12 added ``type_params`` to every function, 3.13 stopped printing empty
    fields): here a field that is None or an empty list is never written.
    """
    out: list[str] = []
    _write(node, out)
    return "".join(out)


def _write(node, out: list[str]) -> None:
    if isinstance(node, ast.AST):
        out.append(type(node).__name__)
        out.append("(")
        for name in node._fields:
            if name in _SKIPPED_FIELDS:
                continue
            value = getattr(node, name, None)
            if name == "body" and isinstance(node, _WITH_DOCSTRING) and value and _is_docstring(value[0]):
                value = value[1:]
            elif name == "values" and isinstance(node, ast.JoinedStr):
                value = _joined_parts(value)
            if value is None or (isinstance(value, list) and not value):
                continue
            out.append(name)
            out.append("=")
            _write(value, out)
            out.append(",")
        out.append(")")
    elif isinstance(node, list):
        out.append("[")
        for item in node:
            _write(item, out)
            out.append(",")
        out.append("]")
    else:  # a constant's value (str, bytes, int, float, complex, bool, None, Ellipsis) or a name
        out.append(repr(node))


def _joined_parts(values: list[ast.AST]) -> list[ast.AST]:
    """An f-string's parts with adjacent text merged and empty text dropped: Python 3.12.1 gives a format
    spec an empty ``Constant('')`` that other versions do not."""
    parts: list[ast.AST] = []
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if not value.value:
                continue
            if parts and isinstance(parts[-1], ast.Constant) and isinstance(parts[-1].value, str):
                parts[-1] = ast.Constant(parts[-1].value + value.value)
                continue
        parts.append(value)
    return parts


# ------------------------------------------------------------------ argument checks
#: The decorator that marks a function of this package as an argument check (:func:`profiling_guide.errors.argument_check`).
CHECK_DECORATOR = "argument_check"


def _always_raises(stmts: list[ast.stmt]) -> bool:
    """Whether every way through ``stmts`` ends in a ``raise`` (the last statement raises, or is an ``if`` whose
    branches both do)."""
    if not stmts:
        return False
    last = stmts[-1]
    if isinstance(last, ast.Raise):
        return True
    return isinstance(last, ast.If) and _always_raises(last.body) and _always_raises(last.orelse)


def is_check_def(stmt: ast.stmt) -> bool:
    """Whether ``stmt`` defines a function decorated with :data:`CHECK_DECORATOR`."""
    return isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        (d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else None) == CHECK_DECORATOR
        for d in stmt.decorator_list)


def without_checks(stmts: list[ast.stmt], checks: frozenset[str] = frozenset()) -> list[ast.stmt]:
    """``stmts`` less their argument checks, as copies (the statements given are left alone).

    Left out: ``assert``; an ``if`` whose branch always raises (:func:`_always_raises`: the ``if`` gives way to
    its ``else``, an ``elif ...: raise`` is dropped); a bare call of a name in ``checks`` (a function marked
    :func:`~profiling_guide.errors.argument_check`); then a loop or an ``if`` left with nothing to do. The
    conditions are taken to have no effect of their own, as a check's do not.
    """
    out: list[ast.stmt] = []
    for stmt in stmts:
        if _is_check(stmt, checks):
            continue
        if isinstance(stmt, ast.If) and _always_raises(stmt.body):
            out += without_checks(stmt.orelse, checks)
            continue
        kept = _blocks_without_checks(stmt, checks)
        if kept is not None:
            out.append(kept)
    return out


def _is_check(stmt: ast.stmt, checks: frozenset[str]) -> bool:
    """An ``assert``, or a bare call of a name in ``checks``."""
    if isinstance(stmt, ast.Assert):
        return True
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in checks


def _blocks_without_checks(stmt: ast.stmt, checks: frozenset[str]) -> ast.stmt | None:
    """A copy of ``stmt`` with the checks out of its blocks (an ``if``'s ``else`` that always raises dropped); None
    for a loop or an ``if`` left with nothing to do, ``pass`` for any other block left empty."""
    stmt = copy.copy(stmt)
    for block in ("body", "orelse", "finalbody"):
        inner = getattr(stmt, block, None)
        if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
            raises = block == "orelse" and isinstance(stmt, ast.If) and _always_raises(inner)
            setattr(stmt, block, [] if raises else without_checks(inner, checks))
    if isinstance(stmt, ast.Try):
        stmt.handlers = [copy.copy(h) for h in stmt.handlers]
        for handler in stmt.handlers:
            handler.body = without_checks(handler.body, checks) or [ast.Pass()]
    if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While)) and not stmt.body and not stmt.orelse:
        return None  # nothing left to do: it held checks only
    if isinstance(getattr(stmt, "body", None), list) and not stmt.body:
        stmt.body = [ast.Pass()]
    return stmt


# ------------------------------------------------------------------ references a syntax tree makes
def _scan(node: ast.AST) -> tuple[list[tuple[str, ...]], list[ast.stmt]]:
    """The dotted names ``node`` loads (``("fused_mlp", "geglu")``, ``("LAUNCHERS",)``; annotations left
    out), and the import statements in it, in one walk."""
    found: list[tuple[str, ...]] = []
    imports: list[ast.stmt] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            imports.append(n)
            return
        if isinstance(n, ast.Attribute):
            parts = []
            base = n
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                found.append((base.id, *reversed(parts)))
                return
            visit(base)
            return
        if isinstance(n, ast.Name):
            if not isinstance(n.ctx, ast.Store):
                found.append((n.id,))
            return
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in n.decorator_list:
                visit(d)
            _visit_arguments(n.args, visit)
            for stmt in n.body:
                visit(stmt)
            return
        if isinstance(n, ast.Lambda):
            _visit_arguments(n.args, visit)
            visit(n.body)
            return
        if isinstance(n, ast.AnnAssign):
            visit(n.target)
            if n.value is not None:
                visit(n.value)
            return
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return found, imports


def _visit_arguments(args: ast.arguments, visit) -> None:
    for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
        visit(default)


def _imports_in(statements: list[ast.stmt], module: str, is_package: bool) -> dict[str, tuple[str, str | None]]:
    """Names the import statements among ``statements`` bind: name → (module, attribute; None for the module)."""
    bound: dict[str, tuple[str, str | None]] = {}
    for n in statements:
        if isinstance(n, ast.Import):
            for alias in n.names:
                if alias.asname:
                    bound[alias.asname] = (alias.name, None)
                else:  # ``import a.b.c`` binds ``a``
                    top = alias.name.split(".")[0]
                    bound[top] = (top, None)
        elif isinstance(n, ast.ImportFrom):
            source = _absolute(n.module, n.level, module, is_package)
            for alias in n.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = (source, alias.name)
    return bound


def _absolute(name: str | None, level: int, module: str, is_package: bool) -> str:
    if not level:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, *([name] if name else [])])


def _ours(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


# ------------------------------------------------------------------ this package's modules
def module_path(module: str) -> Path | None:
    """The source file of ``module`` (``profiling_guide.<...>``) in this package, or None if there is none."""
    if not _ours(module):
        return None
    rel = Path(*module.split(".")[1:]) if "." in module else Path()
    for path in (PACKAGE_ROOT / rel / "__init__.py", (PACKAGE_ROOT / rel).with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _source(path: Path) -> str:
    """The text of a module of this package, read again whenever the file changed: an edit counts at once."""
    found = path.stat()
    stamp = (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)
    kept = _TEXTS.get(path)
    if kept is None or kept[0] != stamp:
        kept = _TEXTS[path] = (stamp, path.read_text(encoding="utf-8"))
    return kept[1]


_TEXTS: dict[Path, tuple[tuple, str]] = {}


class _Module:
    """One module of this package, parsed once per text: which top-level statements define each name."""

    def __init__(self, name: str, path: Path, text: str):
        self.name, self.path = name, path
        self.tree = ast.parse(text, filename=str(path))
        self.is_package = path.name == "__init__.py"
        #: name → the top-level statements that bind it (its def or class, its assignments, or the
        #: ``if``/``try`` statement an assignment sits in), in source order
        self.bindings: dict[str, list[ast.stmt]] = {}
        self.star_imports: list[str] = []
        self._index(self.tree.body, None)
        #: name → (module, attribute, or None for the module itself) of each import outside a def or class
        self.imports = _imports_in([n for s in self.tree.body if not isinstance(s, _DEFINITIONS)
                                    for n in ast.walk(s)], name, self.is_package)
        self._texts: dict[str, str] = {}
        self._scans: dict[str, tuple[list[tuple[str, ...]], dict]] = {}
        self._stripped: dict[str, list[ast.AST]] = {}
        self._checks: frozenset[str] | None = None

    def _index(self, stmts: list[ast.stmt], top: ast.stmt | None) -> None:
        for stmt in stmts:
            outer = top or stmt
            if isinstance(stmt, _DEFINITIONS):
                self._bind(stmt.name, outer)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            self._bind(n.id, outer)
            elif isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                self.star_imports.append(_absolute(stmt.module, stmt.level, self.name, self.is_package))
            elif isinstance(stmt, _COMPOUND):
                for block in ("body", "orelse", "finalbody"):
                    self._index(getattr(stmt, block, None) or [], outer)
                for handler in getattr(stmt, "handlers", None) or []:
                    self._index(handler.body, outer)
                for case in getattr(stmt, "cases", None) or []:
                    self._index(case.body, outer)

    def _bind(self, name: str, stmt: ast.stmt) -> None:
        stmts = self.bindings.setdefault(name, [])
        if not any(s is stmt for s in stmts):
            stmts.append(stmt)

    def _nodes(self, name: str) -> list[ast.AST]:
        """The statements that define ``name`` (``""``: the whole module), less their argument checks
        (:func:`without_checks`)."""
        if name not in self._stripped:
            if name == "":
                self._stripped[name] = [ast.Module(body=without_checks(self.tree.body, self.checks),
                                                   type_ignores=[])]
            else:
                self._stripped[name] = without_checks(self.bindings[name], self.checks)
        return self._stripped[name]

    @property
    def checks(self) -> frozenset[str]:
        """The names this module calls argument checks by: its own functions marked
        :func:`~profiling_guide.errors.argument_check`, and those it imports from another module of this
        package."""
        if self._checks is None:
            own = {name for name, stmts in self.bindings.items() if any(is_check_def(s) for s in stmts)}
            for alias, (module, attribute) in self.imports.items():
                other = _read_module(module) if attribute and _ours(module) and module != self.name else None
                if other is not None and any(is_check_def(s) for s in other.bindings.get(attribute, [])):
                    own.add(alias)
            self._checks = frozenset(own)
        return self._checks

    def text(self, name: str) -> str:
        """The normalized tree of ``name``'s statements (``""``: the whole module)."""
        if name not in self._texts:
            self._texts[name] = "\n".join(normalized(n) for n in self._nodes(name))
        return self._texts[name]

    def refs(self, name: str) -> tuple[list[tuple[str, ...]], dict]:
        """The dotted names ``name``'s statements load, and the names the imports inside them bind (in a
        function's body: what its code may mean by those names)."""
        if name not in self._scans:
            chains: list[tuple[str, ...]] = []
            imports: list[ast.stmt] = []
            for node in self._nodes(name):
                found, inner = _scan(node)
                chains += found
                imports += inner
            self._scans[name] = list(dict.fromkeys(chains)), _imports_in(imports, self.name, self.is_package)
        return self._scans[name]


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@lru_cache(maxsize=256)  # pages fingerprint the same modules over and over: each text is parsed once
def _parsed(name: str, path: Path, text: str) -> _Module:
    return _Module(name, path, text)


def _read_module(name: str) -> _Module | None:
    """This package's module ``name``, parsed (once per text), or None where it has no file that parses."""
    path = module_path(name)
    if path is None:
        return None
    try:
        return _parsed(name, path, _source(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


# ------------------------------------------------------------------ the walk
Key = tuple[str, str]  # (module, top-level name); the name "" is the whole module


def key_text(key: Key) -> str:
    return f"{key[0]}:{key[1]}"


class _Walk:
    """One closure's walk: each module read once, the names of each definition resolved to definitions."""

    def __init__(self):
        self._modules: dict[str, _Module | None] = {}

    def read(self) -> set[Path]:
        """The files of every module this walk parsed: where its definitions live and where names were looked up."""
        return {m.path for m in self._modules.values() if m is not None}

    def module(self, name: str) -> _Module | None:
        if name not in self._modules:
            self._modules[name] = _read_module(name)
        return self._modules[name]

    # -------------------------------------------------------------- names in source
    def resolve(self, module: _Module, chain: tuple[str, ...], inner: dict | None = None,
                depth: int = 0) -> list[Key]:
        """The definitions of this package the dotted name ``chain``, read in ``module``, leads to.

        ``inner``: the imports inside the definition the name is read in. A name may mean more than
        one thing (imported inside one function, defined at the top of the module): all are followed.
        """
        if not chain or depth > 32:
            return []
        head, rest = chain[0], chain[1:]
        found: list[Key] = []
        if head in module.bindings:
            found.append((module.name, head))
        for imports in (inner or {}, module.imports):
            if head in imports:
                found += self.follow_import(imports[head], rest, depth)
        if not found:
            if module.is_package and module_path(f"{module.name}.{head}") is not None:
                found += self.into_module(f"{module.name}.{head}", rest, depth)
            for star in module.star_imports:
                other = self.module(star)
                if other is not None:
                    found += self.resolve(other, chain, None, depth + 1)
        return found

    def follow_import(self, target: tuple[str, str | None], rest: tuple[str, ...], depth: int) -> list[Key]:
        source, attribute = target
        if not _ours(source):
            return []  # third-party code: out of the closure
        if attribute is None:
            return self.into_module(source, rest, depth)
        return self.into_module(source, (attribute, *rest), depth, whole_if_empty=False)

    def into_module(self, name: str, rest: tuple[str, ...], depth: int, whole_if_empty: bool = True) -> list[Key]:
        """``name.rest...``: a definition of module ``name``, or (``rest`` empty) the whole module."""
        module = self.module(name)
        if module is None:
            return []
        if not rest:
            return [(name, "")] if whole_if_empty else []
        return self.resolve(module, rest, None, depth + 1)

    # -------------------------------------------------------------- objects at run time
    def key_of(self, obj) -> Key | None:
        """The definition of this package ``obj`` (a module, function, class or kernel) is, if it is one."""
        if isinstance(obj, types.ModuleType):
            name = getattr(obj, "__name__", "")
            return (name, "") if _ours(name) and self.module(name) is not None else None
        obj = unwrapped(obj)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            return None  # an instance, even of one of our classes, is not followed: see the module's docstring
        module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
            return None
        parsed = self.module(module) if _ours(module) else None
        top = qualname.split(".")[0]
        return (module, top) if parsed is not None and top in parsed.bindings else None

    def runtime_refs(self, fn) -> list[Key]:
        """The definitions of this package that ``fn``'s code loads from its globals and its closure."""
        code = getattr(fn, "__code__", None)
        if not isinstance(code, types.CodeType):
            return []
        names = list(dict.fromkeys(n for c in _code_objects(code) for n in c.co_names))
        keys: list[Key] = []
        modules = [n for n in names if _ours(n)]  # ``import profiling_guide.x`` in the body
        for value in _loaded_values(fn, names):
            if isinstance(value, types.ModuleType):
                if _ours(getattr(value, "__name__", "")):
                    modules.append(value.__name__)
            elif (key := self.key_of(value)) is not None:
                keys.append(key)
        for name in dict.fromkeys(modules):
            keys += self.module_attributes(name, names)
        return keys

    def module_attributes(self, name: str, names: list[str]) -> list[Key]:
        """The attributes code that loads ``names`` reads of this package's module ``name`` (``fused_mlp.geglu``):
        every one of those names that the module defines or imports, a superset, or that is a module of it."""
        module = self.module(name)
        if module is None:
            return []
        keys: list[Key] = []
        for attribute in names:
            if attribute in module.bindings or attribute in module.imports:
                keys += self.resolve(module, (attribute,))
            elif module.is_package and module_path(f"{name}.{attribute}") is not None:
                keys += self.into_module(f"{name}.{attribute}", (), 0)
        return keys


def _loaded_values(fn, names: list[str]) -> list:
    """The values ``fn``'s code can load by ``names`` from its globals, and its closure's filled cells."""
    scope = getattr(fn, "__globals__", None) or {}
    values = [scope[n] for n in names if n in scope]
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a cell not filled yet
            pass
    return values


def unwrapped(obj):
    """A bound method's function; a Triton or Gluon kernel's Python function (``.fn``, through autotune and
    heuristics); a ``functools.wraps`` wrapper's function."""
    obj = getattr(obj, "__func__", obj)
    for _ in range(8):
        inner = getattr(obj, "fn", None) if type(obj).__module__.split(".")[0] == "triton" else None
        inner = inner if inner is not None else getattr(obj, "__wrapped__", None)
        if inner is None:
            break
        obj = inner
    return obj


def _code_objects(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _own_text(obj) -> str | None:
    """``obj``'s own source as a normalized tree, or None where it has none that parses (a lambda in a call)."""
    try:
        return normalized(ast.Module(body=without_checks(ast.parse(textwrap.dedent(inspect.getsource(obj))).body),
                                     type_ignores=[]))
    except (OSError, TypeError, SyntaxError, ValueError):
        found = _class_in_its_file(obj)
        return normalized(ast.Module(body=without_checks([found[1]]), type_ignores=[])) if found else None


def _class_in_its_file(cls) -> tuple[Path, ast.ClassDef] | None:
    """A class's file and definition, found through its methods' code where its module has no file.

    sphinx-gallery runs a page in a module of its own, without ``__file__``: ``inspect`` cannot find
    a class defined on the page, while its methods' code still names the page's file. The definition
    found normalizes as ``inspect.getsource`` would give it (a page run as a script), so a recording
    made one way stays fresh the other.
    """
    if not inspect.isclass(cls):
        return None
    for member in vars(cls).values():
        code = getattr(unwrapped(member), "__code__", None)
        if code is None or not Path(code.co_filename).is_file():
            continue
        try:
            tree = ast.parse(Path(code.co_filename).read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None
        for node in ast.walk(tree):
            if (isinstance(node, ast.ClassDef) and node.name == cls.__name__
                    and node.lineno <= code.co_firstlineno <= (node.end_lineno or node.lineno)):
                return Path(code.co_filename).resolve(), node
    return None


def _own_file(obj) -> Path | None:
    try:
        found = inspect.getsourcefile(obj)
    except (OSError, TypeError):
        found = _class_in_its_file(obj)
        return found[0] if found else None
    return Path(found).resolve() if found else None


@dataclass
class Reached:
    """The closure of a list of code objects: what its fingerprint hashes, and where each piece lives."""

    #: key → normalized text: ``module:name`` for a definition of this package (``module:`` for a whole
    #: module), ``listed <i>:<qualname>`` for a listed object that is not one (a page's step, a string)
    texts: dict[str, str]
    #: key → the file holding it (None: a string, or an object with no source file)
    files: dict[str, Path | None]
    #: every file the closure was read from: the modules of its definitions, those whose imports were
    #: followed, and the files of the listed objects (a page's, whose globals named what was followed)
    read: set[Path]

    def fingerprint(self, args: dict | None = None) -> str:
        """A short hash of every text, in the order of the keys, and of ``args``."""
        h = hashlib.sha256()
        for key in sorted(self.texts):
            h.update(key.encode())
            h.update(b"\0")
            h.update(self.texts[key].encode())
            h.update(b"\0")
        h.update(json.dumps(args or {}, sort_keys=True, default=str).encode())
        return h.hexdigest()[:16]

    def definitions(self) -> list[str]:
        """The keys of this package's definitions in the closure, sorted."""
        return sorted(k for k in self.texts if not k.startswith("listed "))


def listed_texts(code: Iterable, fallback=None) -> list[str]:
    """The normalized text of each object of ``code`` alone, nothing it calls (what a *listed* fingerprint
    hashes): a definition of this package as :func:`reach` reads it, another object (a page's function) from its
    own source, less argument checks either way; a string as it is; ``fallback(obj)`` (default: its name) for an
    object with no source that parses."""
    walk = _Walk()
    texts = []
    for obj in code:
        if isinstance(obj, str):
            texts.append(obj)
            continue
        found = walk.key_of(obj)
        if found is not None:
            texts.append(walk.module(found[0]).text(found[1]))
            continue
        target = unwrapped(obj)
        text = _own_text(target)
        qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
        texts.append(text if text is not None else (fallback(obj) if fallback else qualname))
    return texts


#: Definitions the walk does not enter: they run after the GPU's work, on what it recorded, and decide nothing a
#: recording holds. ``profile_callable`` writes an HTML report beside its trace; a chapter keeps the trace and the
#: run record, and replay reads them with the analysis as it stands, so an edit to the analysis is not a change
#: to what ran.
AFTER_THE_RUN = frozenset({("profiling_guide.report.html", "write_report")})


def reach(code: Iterable, fallback=None) -> Reached:
    """The closure of ``code`` (functions, classes, modules, kernels, strings): see the module's docstring.

    ``fallback(obj)`` is the text of a listed object that has no source that parses (default: its name).
    """
    walk = _Walk()
    texts: dict[str, str] = {}
    files: dict[str, Path | None] = {}
    queue: list[Key] = []
    for i, obj in enumerate(code):
        if isinstance(obj, str):
            key = f"listed {i}:str"
            texts[key], files[key] = obj, None
            continue
        found = walk.key_of(obj)
        if found is not None:
            queue.append(found)
            continue
        target = unwrapped(obj)
        qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
        key = f"listed {i}:{qualname}"
        text = _own_text(target)
        texts[key] = text if text is not None else (fallback(obj) if fallback else qualname)
        files[key] = _own_file(target)
        if inspect.isclass(target):
            for member in vars(target).values():
                queue += walk.runtime_refs(unwrapped(member))
        else:
            queue += walk.runtime_refs(target)
    seen: set[Key] = set()
    while queue:
        key = queue.pop()
        if key in seen or key in AFTER_THE_RUN:
            continue
        seen.add(key)
        module = walk.module(key[0])
        if module is None or (key[1] and key[1] not in module.bindings):
            continue
        name = key_text(key)
        texts[name], files[name] = module.text(key[1]), module.path
        chains, inner = module.refs(key[1])
        for chain in chains:
            queue += walk.resolve(module, chain, inner)
    read = walk.read() | {path for key, path in files.items() if key.startswith("listed ") and path is not None}
    return Reached(texts, files, read)
