"""Build configuration beyond pyproject.toml: the optional native scanner of the Apple Health
connector (connectors/healthkit/_scan.c). `optional=True`: without a C compiler the install
still succeeds and the connector uses its pure-Python path."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "connectors.healthkit._scan",
            sources=["connectors/healthkit/_scan.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
