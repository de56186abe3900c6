"""Builds the LD_PRELOAD shim with the package: ``pip install .`` compiles it.

The shim is a plain shared object, not a Python extension: it is loaded by the dynamic
loader into traced processes through ``LD_PRELOAD``. setuptools' extension machinery is
used only because it knows how to find the compiler and place the result in the package.
"""

from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).parent
SOURCES = sorted(str(p.relative_to(HERE)) for p in (HERE / "memotest" / "_shim").glob("*.c"))

setup(
    ext_modules=[
        Extension(
            "memotest._shim.memotest_shim",
            sources=SOURCES,
            depends=[str(p.relative_to(HERE)) for p in (HERE / "memotest" / "_shim").glob("*.h")],
            define_macros=[("_GNU_SOURCE", "1")],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-pthread", "-fno-strict-aliasing"],
            extra_link_args=["-pthread"],
            libraries=["dl"],
        ),
        # A CPython extension (unlike the shim): notes the code objects a forked pytest run
        # executed (memotest/_executed/executed.c, memotest/tracer/codemap.py). Optional:
        # without Python's headers it is not built, and every file is fingerprinted whole.
        Extension(
            "memotest._executed._executed",
            sources=["memotest/_executed/executed.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra"],
            optional=True,
        ),
    ],
)
