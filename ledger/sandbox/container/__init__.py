"""Task environments in containers (podman, else docker): the engine layer.

    engine.py    which engine, its version, whether a container runs here and why not; the
                 engine configuration this machine class needs (``configure``)
    base.py      the base image built offline (mmdebstrap + import), used by CI and the tests
    images.py    a task's environment made ready: pulled or built once, cached by the content
                 digest of its Dockerfile and build context; the ``environment.ready`` record
    __main__.py  ``python -m ledger.sandbox.container probe|configure|base|setup``
"""
