# dsdoctor's bootstrap for unmodified Python ranks. `dsdoctor run` puts this folder first on the
# ranks' PYTHONPATH, so Python imports this file at start-up (site.py's sitecustomize hook). It
# first runs the sitecustomize this one hides (the distribution's or the user's), then installs
# the collective tracer (dsdoctor_tracer.py). Nothing here may stop the program: any failure is
# one line on stderr and the program runs untraced.
import os
import sys


def _chain_to_the_hidden_sitecustomize():
    here = os.path.realpath(os.path.dirname(os.path.abspath(__file__)))
    ours = sys.modules.pop("sitecustomize", None)
    removed = [(i, p) for i, p in enumerate(sys.path) if os.path.realpath(os.path.abspath(p or os.curdir)) == here]
    try:
        for i, _ in reversed(removed):
            del sys.path[i]
        try:
            import importlib

            importlib.import_module("sitecustomize")
        except ImportError as e:
            if getattr(e, "name", None) != "sitecustomize":
                raise
    finally:
        # Put our folder back where it was, keeping whatever the other sitecustomize added.
        for i, p in removed:
            sys.path.insert(min(i, len(sys.path)), p)
        if ours is not None:
            sys.modules["sitecustomize"] = ours


try:
    _chain_to_the_hidden_sitecustomize()
except Exception as e:  # the other sitecustomize failed: Python would only have warned too
    sys.stderr.write("dsdoctor: the hidden sitecustomize raised %s: %s\n" % (type(e).__name__, e))

try:
    import dsdoctor_tracer

    dsdoctor_tracer.install()
except Exception as e:
    sys.stderr.write("dsdoctor: collective tracer not installed (%s: %s); the program runs untraced\n" % (type(e).__name__, e))
