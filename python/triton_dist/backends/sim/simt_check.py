"""Which per-thread code the simulator can run faithfully (issue 16, point 5).

The simulator runs a program as ONE thread: ``tid() == 0``, ``ntid() == num_threads() == 1``. That gives a GPU's
result only where every other thread of the program would do nothing, or exactly what thread 0 does:

* stride loops over the threads, ``for i in range(u + tid * c, stop, ntid * c)`` (``u``, ``stop``, ``c`` the same for
  every thread; ``c`` optional; ``ntid`` also ``num_threads()`` or the region's thread count): with one thread of
  stride ``c`` the loop visits what all the threads of a GPU program visit together;
* guards without ``else``: ``if tid == 0:`` (the other threads skip) and ``if tid < K:`` (threads 1 .. K-1 repeat
  thread 0's body: the same call, as for a warp-scope SHMEM call);
* plain aliases (``t = tid(0)``), and ``tid(1)`` / ``tid(2)`` / ``ntid(1)`` / ``ntid(2)`` (0 and 1 on every target).

Any other use of the thread index or count -- an address or peer computed from it (per-thread copies, per-thread
peers), a value stored, an ``else`` branch, a ``while`` on it -- would run thread 0's share alone: a silently wrong
result, or a wait for something only another thread does. :func:`check_caller` finds the kernel function calling
``tid()`` / ``ntid()`` / ``num_threads()`` / ``num_warps()`` / ``simt_exec_region`` on the simulator, reads its source
once (cached per function), and raises :class:`SimUnsupportedSimt` naming the first such use.
"""
from __future__ import annotations

import ast
import linecache
import os
import sys
import threading

__all__ = ["SimUnsupportedSimt", "check_caller", "find_unsupported_use"]

_TID = "tid"
_COUNT = "count"
_COUNT_CALLS = ("ntid", "num_threads", "num_warps")

#: source files whose frames are not the user's kernel: Triton itself and triton_dist's language / backend layers
_SKIP_DIRS = []
for _mod in ("triton", ):
    _m = sys.modules.get(_mod)
    if _m is not None and getattr(_m, "__file__", None):
        _SKIP_DIRS.append(os.path.dirname(os.path.abspath(_m.__file__)) + os.sep)
_PKG = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../triton_dist
_SKIP_DIRS += [os.path.join(_PKG, "language") + os.sep, os.path.join(_PKG, "backends") + os.sep,
               os.path.join(_PKG, "_compat") + os.sep]


class SimUnsupportedSimt(RuntimeError):
    """Per-thread code the simulator cannot run as one thread per program (module docstring)."""


def _call_name(node):
    if isinstance(node, ast.Call):
        f = node.func
        if isinstance(f, ast.Name):
            return f.id
        if isinstance(f, ast.Attribute):
            return f.attr
    return None


def _axis_is_zero(call):
    args = list(call.args) + [k.value for k in call.keywords if k.arg == "axis"]
    if not args:
        return True
    a = args[0]
    return isinstance(a, ast.Constant) and a.value == 0


def _source_kind(node):
    """``_TID`` / ``_COUNT`` when ``node`` is a call giving the thread index / count along axis 0, else None."""
    name = _call_name(node)
    if name == "tid":
        return _TID if _axis_is_zero(node) else None
    if name == "ntid":
        return _COUNT if _axis_is_zero(node) else None
    if name in ("num_threads", "num_warps"):
        return _COUNT
    return None


class _Analysis:
    def __init__(self, fn_node):
        self.fn = fn_node
        self.kinds = {}  # name -> _TID / _COUNT
        self.parent = {}
        for node in ast.walk(fn_node):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self._collect_names()

    def kind(self, node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self.kinds.get(node.id)
        return _source_kind(node)

    def _collect_names(self):
        for node in ast.walk(self.fn):
            if isinstance(node, ast.With):
                for item in node.items:
                    if _call_name(item.context_expr) == "simt_exec_region" and \
                            isinstance(item.optional_vars, ast.Tuple) and len(item.optional_vars.elts) == 2:
                        t, n = item.optional_vars.elts
                        if isinstance(t, ast.Name):
                            self.kinds[t.id] = _TID
                        if isinstance(n, ast.Name):
                            self.kinds[n.id] = _COUNT
        changed = True
        while changed:  # aliases of aliases
            changed = False
            for node in ast.walk(self.fn):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    k = self.kind(node.value)
                    if k is not None and self.kinds.get(node.targets[0].id) != k:
                        self.kinds[node.targets[0].id] = k
                        changed = True

    # ------------------------------------------------------------------ allowed forms
    def _scaled(self, expr, want):
        """``(ref, c)`` when ``expr`` is ``ref``, ``ref * c`` or ``c * ref`` with ``ref`` of kind ``want`` and ``c``
        free of thread values (``c`` is None when absent)."""
        if self.kind(expr) == want:
            return expr, None
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
            for ref, c in ((expr.left, expr.right), (expr.right, expr.left)):
                if self.kind(ref) == want and not self._uses(c):
                    return ref, ast.dump(c)
        return None

    def _stride_loop(self, call):
        """Whether ``call`` is ``range(u + tid * c, stop, ntid * c)`` (module docstring)."""
        if _call_name(call) != "range" or len(call.args) != 3 or call.keywords:
            return False
        start, stop, step = call.args
        if self._uses(stop):
            return False
        s = self._scaled(start, _TID)
        if s is None and isinstance(start, ast.BinOp) and isinstance(start.op, ast.Add):
            for part, rest in ((start.left, start.right), (start.right, start.left)):
                if not self._uses(rest):
                    s = self._scaled(part, _TID)
                    if s is not None:
                        break
        n = self._scaled(step, _COUNT)
        return s is not None and n is not None and s[1] == n[1]

    def _guard(self, if_node):
        """Whether ``if_node`` is ``if tid == 0:`` / ``if tid < K:`` (``<=``, mirrored forms) without ``else``."""
        test = if_node.test
        if if_node.orelse or not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return False
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if self.kind(right) == _TID and not self._uses(left):  # K > tid  ->  tid < K
            left, right = right, left
            op = {ast.Gt: ast.Lt(), ast.GtE: ast.LtE(), ast.Eq: ast.Eq()}.get(type(op), op)
        if self.kind(left) != _TID or self._uses(right):
            return False
        if isinstance(op, ast.Eq):
            return isinstance(right, ast.Constant) and right.value == 0
        return isinstance(op, (ast.Lt, ast.LtE))

    def _uses(self, expr):
        return any(self.kind(n) is not None for n in ast.walk(expr))

    def _allowed(self, ref):
        parent = self.parent.get(ref)
        if isinstance(parent, ast.Assign) and parent.value is ref and len(parent.targets) == 1 and \
                isinstance(parent.targets[0], ast.Name):
            return True  # an alias
        if isinstance(parent, ast.withitem):
            return True  # simt_exec_region's own (tid, n) target
        # climb to the statement, remembering the expression directly under it
        node, below = ref, None
        while node is not None and not isinstance(node, ast.stmt):
            node, below = self.parent.get(node), node
        if isinstance(node, ast.For) and below is node.iter and isinstance(node.iter, ast.Call):
            return self._stride_loop(node.iter)
        if isinstance(node, ast.If) and below is node.test:
            return self._guard(node)
        return False

    def first_unsupported(self):
        refs = [n for n in ast.walk(self.fn) if self.kind(n) is not None]
        for ref in sorted(refs, key=lambda n: (n.lineno, n.col_offset)):
            if not self._allowed(ref):
                return ref
        return None


def _function_node(filename, lineno, name):
    """``(source, FunctionDef)`` of the function ``name`` defined at ``filename:lineno`` (def or decorator line)."""
    source = "".join(linecache.getlines(filename))
    if not source:
        return None, None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None, None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name and \
                (node.lineno == lineno or any(d.lineno == lineno for d in node.decorator_list)):
            return source, node
    return None, None


def _statement_text(source, stmt):
    """The statement as written (its header for ``for`` / ``if`` / ``while``), on one line."""
    def seg(node):
        return " ".join((ast.get_source_segment(source, node) or ast.unparse(node)).split())

    if isinstance(stmt, ast.For):
        return f"for {seg(stmt.target)} in {seg(stmt.iter)}"
    if isinstance(stmt, (ast.If, ast.While)):
        return f"{'if' if isinstance(stmt, ast.If) else 'while'} {seg(stmt.test)}"
    if isinstance(stmt, ast.With):
        return "with " + ", ".join(seg(i.context_expr) for i in stmt.items)
    return seg(stmt)


def find_unsupported_use(filename, lineno, name):
    """``None`` when the function ``name`` defined at ``filename:lineno`` uses the thread index / count only in
    the forms the simulator runs faithfully, else ``(line, statement text)`` of the first other use."""
    source, fn = _function_node(filename, lineno, name)
    if fn is None:
        return None  # no source (the interpreter cannot run it either)
    analysis = _Analysis(fn)
    ref = analysis.first_unsupported()
    if ref is None:
        return None
    stmt = ref
    while not isinstance(stmt, ast.stmt):
        stmt = analysis.parent[stmt]
    return ref.lineno, _statement_text(source, stmt)


_verdicts = {}
_lock = threading.Lock()


def _kernel_frame():
    frame = sys._getframe(2)
    while frame is not None:
        f = os.path.abspath(frame.f_code.co_filename)
        if not any(f.startswith(d) for d in _SKIP_DIRS) and not frame.f_code.co_filename.startswith("<frozen"):
            return frame
        frame = frame.f_back
    return None


def check_caller(what: str) -> None:
    """Called by the simulator's ``tid`` / ``ntid`` / ``num_threads`` / ``num_warps`` / region entry: raise
    :class:`SimUnsupportedSimt` when the kernel function calling it uses the thread index / count in a form the
    simulator cannot run as one thread (module docstring). Cheap after the first call per function."""
    frame = _kernel_frame()
    if frame is None:
        return
    code = frame.f_code
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    verdict = _verdicts.get(key, False)
    if verdict is False:
        with _lock:
            verdict = _verdicts[key] = find_unsupported_use(*key)
    if verdict is None:
        return
    line, text = verdict
    raise SimUnsupportedSimt(
        f"triton_dist simulator: {code.co_name} ({os.path.basename(code.co_filename)}, line {line}) uses the thread "
        f"index or count ({what}) per thread: `{text}`; the simulator runs one thread per program (tid() == 0, "
        f"ntid() == 1), so per-thread peers or copies would run thread 0's share alone. It runs stride loops "
        f"`for i in range(tid, N, ntid)` (also tid * c, ntid * c) and `if tid == 0:` / `if tid < K:` guards without "
        f"else: rewrite the code in those forms, or run it on a GPU")
