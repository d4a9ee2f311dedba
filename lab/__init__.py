"""The research harness that drives the product: stream people for training
(:mod:`lab.streams`, ``rhythm train streams``), synthetic people and files for tests and
benchmarks (:mod:`lab.people`).

The lab may import the product (it runs the product's own path) and ``training``; the
product never imports it (an import contract says so; the one door is the lazy import inside
the ``rhythm train streams`` command).
"""
