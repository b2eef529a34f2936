"""Where the installed pieces are: the compiler's version, fdemu (the PTX
interpreter behind the CUDA driver API) and the command-line tools, as each
way of installing flashdecode lays them out beside the package."""
import os
import sys

from . import _flashdecode as _native

# "flashdecode 0.2.25 (MLIR 22)", every manifest's compiler_version.
__version__ = _native.COMPILER_VERSION.split()[1]

_PACKAGE = os.path.dirname(os.path.abspath(__file__))
# (libraries, tools) relative to the package: a wheel (`pip install .`)
# carries them inside it; in the build tree the package is build/python/
# flashdecode beside build/lib and build/bin; `cmake --install --prefix P`
# puts it in P/lib/python3/dist-packages/flashdecode, beside P/lib, P/bin.
_LAYOUTS = (("_lib", "_bin"),
            (os.path.join("..", "..", "lib"), os.path.join("..", "..", "bin")),
            (os.path.join("..", "..", ".."),
             os.path.join("..", "..", "..", "..", "bin")))

TOOLS = ("fd-compile", "fd-opt", "fd-plan", "fd-bench", "fd-demo")


def _find(kind, name):
    """The installed file `name` among the layouts' libraries (kind 0) or
    tools (kind 1); FileNotFoundError naming every place looked."""
    looked = []
    for layout in _LAYOUTS:
        path = os.path.normpath(os.path.join(_PACKAGE, layout[kind], name))
        if os.path.isfile(path):
            return path
        looked.append(path)
    raise FileNotFoundError(
        f"{name} is not installed beside the flashdecode package at "
        f"{_PACKAGE}; looked at " + ", ".join(looked) + " (pip install ., "
        "cmake --install, or a build tree's build/python install it)")


def emulator_library():
    """The path of ``libfdemu.so``, fdemu's CUDA driver: set
    ``FD_CUDA_DRIVER`` to it (before the first CUDA call) to run
    ``backend="cuda"`` on a machine without a GPU."""
    return _find(0, "libfdemu.so")


def tool_path(name):
    """The path of an installed command-line tool (one of ``TOOLS``)."""
    if name not in TOOLS:
        raise ValueError(f"no tool {name!r}; the tools are "
                         + ", ".join(TOOLS))
    return _find(1, name)


def _run_tool(name):
    """Replaces this process with the tool, given this process's arguments
    (a wheel's console scripts)."""
    path = tool_path(name)
    os.execv(path, [path] + sys.argv[1:])


def fd_compile():
    _run_tool("fd-compile")


def fd_opt():
    _run_tool("fd-opt")


def fd_plan():
    _run_tool("fd-plan")


def fd_bench():
    _run_tool("fd-bench")


def fd_demo():
    _run_tool("fd-demo")
