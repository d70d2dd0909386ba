"""Triton's interpreter, without the work it repeats at every call of a ``@triton.jit`` helper.

Launching a kernel, the interpreter (Triton 3.6 to 3.9,
``triton/runtime/interpreter.py``) patches ``triton.language`` so that its builtins run
in numpy, and undoes the patch when the launch ends. It patches again at every call of a
``@triton.jit`` helper inside the kernel (``InterpretedFunction.__call__``): each time
it walks every member of ``triton.language`` and its tensor class, finds them patched
already, and sets the same wrappers again. The tests' kernels call a helper a few times
per program (``tile_coordinates``, ``tl.cdiv``, the GeLU): this repeated walk was about
a quarter of their CPU time (with the shortcut, one training step of the tests takes
0.74 times the CPU time it takes without). :func:`skip_the_repeated_patch` makes a
helper's patch a no-op when the language modules the helper sees were patched since the
launch in progress began, by the launch or by an earlier helper (whose patches the
interpreter never undoes); any other patch runs as before. What the kernels compute does
not change: the same numpy code runs.
"""

from __future__ import annotations

import functools


def skip_the_repeated_patch() -> bool:
    """Install the shortcut (see the module docstring); False where this Triton has no such internals."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
        patch_lang, scope_class = interpreter._patch_lang, interpreter._LangPatchScope
        executor = interpreter.GridExecutor
    except (ImportError, AttributeError):
        return False
    if getattr(patch_lang, "skips_repeats", False):
        return True
    launches: list[set] = []  # per launch in progress: the language modules patched since it began

    def languages(fn) -> set:
        # the modules that the interpreter's _patch_lang patches for ``fn``
        return {id(v) for v in fn.__globals__.values() if v is tl or v is tl.core}

    @functools.wraps(patch_lang)
    def patch_once(fn):
        wanted = languages(fn)
        if launches and wanted and wanted <= launches[-1]:
            return scope_class()  # patched since the launch began: nothing to do, nothing to undo
        scope = patch_lang(fn)
        if launches:  # the launch's own patch, or a helper's (which the interpreter never undoes)
            launches[-1] |= wanted
        return scope

    launch = executor.__call__

    @functools.wraps(launch)
    def launch_tracked(self, *args, **kwargs):
        launches.append(set())
        try:
            return launch(self, *args, **kwargs)
        finally:
            launches.pop()

    patch_once.skips_repeats = True
    interpreter._patch_lang = patch_once
    executor.__call__ = launch_tracked
    return True
