"""Python code that both kcore implementations run, in one copy.

The pure twins import these modules (``from kcore.shared.future import ...``). The compiled
modules compile them in with Cython's ``include`` (``future.pyx`` includes ``shared/future.py``),
so the compiled build never imports ``kcore.pure`` or ``kcore.shared``: its types and tracebacks
name the compiled module that ran (``kcore.future.RecordMetadata``). A file here must not define
a name that its compiled module also defines, and editing one needs a rebuild (``pip install``)
for the compiled build, as editing a ``.pyx`` does.
"""
