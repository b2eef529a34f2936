"""flashdecode's PEP 517 build backend: a wheel from a CMake build.

The wheel holds what `cmake --install` puts in the Python package directory
(the pure modules and the native _flashdecode module), fdemu's driver
library under flashdecode/_lib and the tools under flashdecode/_bin, with
[project]'s metadata and console scripts from pyproject.toml. The build is
the Makefile's: an existing one is reused and brought up to date."""
import base64
import hashlib
import os
import re
import stat
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
LLVM_PREFIX = "/usr/lib/llvm-22"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    build = _build_directory(config_settings or {})
    _build(build)
    with tempfile.TemporaryDirectory() as stage:
        subprocess.run(["cmake", "--install", build, "--prefix", stage],
                       check=True, stdout=subprocess.DEVNULL)
        files = _wheel_files(build, stage)
        return _write_wheel(wheel_directory, files)


def _build_directory(config_settings):
    build = (config_settings.get("build-dir") or
             os.environ.get("FD_BUILD_DIR") or os.path.join(ROOT, "build"))
    return os.path.abspath(build)


def _build(build):
    """Configures `build` as the Makefile does when it has no build.ninja,
    then builds it."""
    if not os.path.exists(os.path.join(build, "build.ninja")):
        config = os.path.join(LLVM_PREFIX, "lib", "cmake", "mlir",
                              "MLIRConfig.cmake")
        if not os.path.exists(config):
            raise RuntimeError(
                f"flashdecode needs Debian's LLVM/MLIR 22 ({config} is "
                "missing): apt-get install llvm-22-dev libmlir-22-dev "
                "mlir-22-tools llvm-22-tools, or run `make demo`, which "
                "installs every package the build needs")
        subprocess.run(["make", "-C", ROOT, f"BUILD_DIR={build}",
                        f"LLVM_PREFIX={LLVM_PREFIX}",
                        f"PYTHON={sys.executable}",
                        os.path.join(build, "build.ninja")], check=True)
    subprocess.run(["cmake", "--build", build], check=True)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    module = os.path.join(build, "python", "flashdecode",
                          "_flashdecode" + suffix)
    if not os.path.exists(module):
        raise RuntimeError(
            f"{build} builds the native module for another Python (no "
            f"{os.path.basename(module)}): build with this one "
            f"({sys.executable}) in another directory, --config-settings "
            "build-dir=DIR")


def _wheel_files(build, stage):
    """(path in the wheel, file on disk) of everything the wheel holds."""
    python_dir = _cache_value(build, "FD_PYTHON_INSTALL_DIR")
    package = os.path.join(stage, python_dir, "flashdecode")
    files = []
    for name in sorted(os.listdir(package)):
        files.append((f"flashdecode/{name}", os.path.join(package, name)))
    files.append(("flashdecode/_lib/libfdemu.so",
                  os.path.join(stage, "lib", "libfdemu.so")))
    for name in sorted(os.listdir(os.path.join(stage, "bin"))):
        files.append((f"flashdecode/_bin/{name}",
                      os.path.join(stage, "bin", name)))
    return files


def _cache_value(build, name):
    with open(os.path.join(build, "CMakeCache.txt")) as cache:
        for line in cache:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    raise RuntimeError(f"{build}/CMakeCache.txt has no {name}")


def _version():
    """The compiler's release: CMake's project(VERSION)."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as cmake:
        match = re.search(r"project\(flashdecode VERSION ([0-9.]+)",
                          cmake.read())
    return match.group(1)


def _tag():
    interpreter = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{interpreter}-{interpreter}{sys.abiflags}-{platform}"


def _metadata(project, version):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {version}", f"Summary: {project['description']}",
             f"Requires-Python: {project['requires-python']}"]
    lines += [f"Requires-Dist: {dependency}"
              for dependency in project.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _write_wheel(wheel_directory, files):
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as handle:
        project = tomllib.load(handle)["project"]
    version, tag = _version(), _tag()
    info = f"flashdecode-{version}.dist-info"
    generated = {
        f"{info}/METADATA": _metadata(project, version),
        f"{info}/WHEEL": ("Wheel-Version: 1.0\nGenerator: flashdecode_build"
                          f"\nRoot-Is-Purelib: false\nTag: {tag}\n"),
        f"{info}/entry_points.txt": "[console_scripts]\n" + "".join(
            f"{name} = {target}\n"
            for name, target in project.get("scripts", {}).items()),
    }
    name = f"flashdecode-{version}-{tag}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        for archived, path in files:
            with open(path, "rb") as handle:
                data = handle.read()
            entry = zipfile.ZipInfo(archived)
            # A regular file's mode, so that installers keep the tools' and
            # libraries' execute bits.
            entry.external_attr = (stat.S_IFREG |
                                   (os.stat(path).st_mode & 0o777)) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(entry, data)
            records.append(_record(archived, data))
        for archived, text in generated.items():
            data = text.encode()
            wheel.writestr(archived, data)
            records.append(_record(archived, data))
        records.append(f"{info}/RECORD,,")
        wheel.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return name


def _record(archived, data):
    digest = base64.urlsafe_b64encode(
        hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{archived},sha256={digest},{len(data)}"
