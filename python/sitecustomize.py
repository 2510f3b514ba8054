# dsdoctor's bootstrap for unmodified Python ranks. `dsdoctor run` puts this folder first on the
# ranks' PYTHONPATH, so Python imports this file at start-up (site.py's sitecustomize hook). It
# runs the sitecustomize this one hides (the distribution's or the user's), then installs the
# collective tracer (dsdoctor_tracer.py), and leaves nothing of itself where the program can see
# it: sys.modules["sitecustomize"] is the hidden module (or, when there is none, no module), this
# folder is off sys.path, and the tracer is loaded under no name in sys.modules. Nothing here may
# stop the program: any failure is one line on stderr and the program runs untraced.
import sys


def _dsdoctor_bootstrap():
    import os

    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    ours = sys.modules.get("sitecustomize")

    def is_here(p):
        try:
            return os.path.realpath(os.path.abspath(p or os.curdir)) == here
        except Exception:
            return False

    # This folder leaves sys.path for good: the program's imports see the path it set.
    sys.path[:] = [p for p in sys.path if not is_here(p)]
    hidden = None
    try:
        try:
            del sys.modules["sitecustomize"]
            import importlib

            try:
                hidden = importlib.import_module("sitecustomize")
            except ImportError as e:
                if getattr(e, "name", None) != "sitecustomize":
                    raise
        except Exception as e:  # the other sitecustomize failed: Python would only have warned too
            sys.stderr.write("dsdoctor: the hidden sitecustomize raised %s: %s\n" % (type(e).__name__, e))
        try:
            import importlib.util

            spec = importlib.util.spec_from_file_location("dsdoctor_tracer", os.path.join(here, "dsdoctor_tracer.py"))
            tracer = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(tracer)  # not in sys.modules: the wrappers hold what they need
            tracer.install()
        except Exception as e:
            sys.stderr.write("dsdoctor: collective tracer not installed (%s: %s); the program runs untraced\n" % (type(e).__name__, e))
    finally:
        # What `import sitecustomize` finds from now on (the import system puts back whatever is in
        # sys.modules when this file ends): the hidden module, else None ("no module named ..."),
        # which _Forget removes at the first import after this file.
        sys.modules["sitecustomize"] = hidden
        if hidden is None:
            sys.meta_path.insert(0, _Forget())


class _Forget:
    """Removes the None that stands for 'no sitecustomize' (the import system needs an entry when
    this file ends) at the first import after start-up, and itself with it."""

    def find_spec(self, name, path=None, target=None):
        # A new list, not a removal: the import system is iterating over the current one.
        sys.meta_path = [f for f in sys.meta_path if f is not self]
        if name != "sitecustomize" and "sitecustomize" in sys.modules and sys.modules["sitecustomize"] is None:
            del sys.modules["sitecustomize"]
        return None


_dsdoctor_bootstrap()
del _dsdoctor_bootstrap
