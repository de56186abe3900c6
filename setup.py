"""Builds the LD_PRELOAD shim with the package: ``pip install .`` compiles it.

The shim is a plain shared object, not a Python extension: it is loaded by the dynamic
loader into traced processes through ``LD_PRELOAD``. setuptools' extension machinery is
used only because it knows how to find the compiler and place the result in the package.
"""

# setuptools first: it provides distutils (its own copy) to the imports after it.
from pathlib import Path  # noqa: I001

from setuptools import Extension, setup

from distutils.ccompiler import new_compiler
from distutils.command.build_scripts import build_scripts
from distutils.sysconfig import customize_compiler

HERE = Path(__file__).parent
SOURCES = sorted(str(p.relative_to(HERE)) for p in (HERE / "memotest" / "_shim").glob("*.c"))

FRONT = sorted(
    str(p.relative_to(HERE)) for p in (HERE / "plugins" / "memotest_make" / "front").glob("*.c")
)


class BuildFront(build_scripts):
    """Compiles ``memotest-sh``, make's SHELL (plugins/memotest_make/front/), into
    the scripts: a program of its own, so that a replayed recipe line starts no Python."""

    def copy_scripts(self):  # type: ignore[no-untyped-def]
        self.mkpath(self.build_dir)
        compiler = new_compiler()
        customize_compiler(compiler)
        build_temp = self.get_finalized_command("build").build_temp
        objects = compiler.compile(
            FRONT, output_dir=build_temp, extra_postargs=["-O2", "-Wall", "-Wextra"]
        )
        out = str(Path(self.build_dir) / "memotest-sh")
        compiler.link_executable(objects, "memotest-sh", output_dir=self.build_dir)
        Path(out).chmod(0o755)
        return [out], [out]


setup(
    scripts=FRONT[:1],
    cmdclass={"build_scripts": BuildFront},
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
