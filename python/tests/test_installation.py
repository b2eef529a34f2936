"""What an installed flashdecode offers beside its API: its version, the
emulator's library and the tools; and the build backend's refusals."""
import importlib.util
import os
import subprocess
import zipfile

import pytest

import flashdecode
from flashdecode import _installation

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def load_backend():
    path = os.path.join(SOURCE, "python", "packaging", "flashdecode_build.py")
    spec = importlib.util.spec_from_file_location("flashdecode_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_version_is_the_manifests():
    kernel = flashdecode.compile(64, 8, 8)
    assert kernel.manifest["compiler_version"] == (
        f"flashdecode {flashdecode.__version__} (MLIR 22)")
    # The wheel's version comes from the same place (CMake's project).
    assert load_backend()._version() == flashdecode.__version__


def test_emulator_library_and_tools_of_the_build_tree():
    library = flashdecode.emulator_library()
    assert os.path.basename(library) == "libfdemu.so"
    assert os.path.isfile(library)
    for tool in _installation.TOOLS:
        assert os.access(_installation.tool_path(tool), os.X_OK)
    version = subprocess.run([_installation.tool_path("fd-compile"),
                              "--version"], capture_output=True, text=True)
    assert flashdecode.__version__ in version.stdout


def test_unknown_tool_names_every_tool():
    with pytest.raises(ValueError, match="no tool 'fd-run'; the tools are "
                       "fd-compile, fd-opt, fd-plan, fd-bench, fd-demo"):
        _installation.tool_path("fd-run")


def test_a_missing_piece_names_where_it_was_looked_for(monkeypatch):
    monkeypatch.setattr(_installation, "_LAYOUTS", (("nowhere", "nowhere"),))
    with pytest.raises(FileNotFoundError,
                       match=r"libfdemu.so is not installed .* looked at "
                             r".*nowhere/libfdemu.so"):
        flashdecode.emulator_library()


def test_backend_without_mlir_names_the_packages(tmp_path, monkeypatch):
    backend = load_backend()
    monkeypatch.setattr(backend, "LLVM_PREFIX", str(tmp_path / "llvm-22"))
    with pytest.raises(RuntimeError,
                       match="needs Debian's LLVM/MLIR 22 .* apt-get install "
                             "llvm-22-dev libmlir-22-dev mlir-22-tools "
                             "llvm-22-tools"):
        backend.build_wheel(str(tmp_path), {"build-dir": str(tmp_path / "b")})


def test_wheel_metadata_and_records(tmp_path):
    backend = load_backend()
    files = [("flashdecode/x.py", str(tmp_path / "x.py"))]
    (tmp_path / "x.py").write_text("y = 1\n")
    name = backend._write_wheel(str(tmp_path), files)
    assert name.startswith(f"flashdecode-{flashdecode.__version__}-cp3")
    with zipfile.ZipFile(tmp_path / name) as wheel:
        info = f"flashdecode-{flashdecode.__version__}.dist-info"
        metadata = wheel.read(f"{info}/METADATA").decode()
        assert "Name: flashdecode\n" in metadata
        assert "Requires-Dist: numpy\n" in metadata
        scripts = wheel.read(f"{info}/entry_points.txt").decode()
        assert "fd-compile = flashdecode._installation:fd_compile" in scripts
        record = wheel.read(f"{info}/RECORD").decode().splitlines()
        assert record[0].startswith("flashdecode/x.py,sha256=")
        assert record[0].endswith(",6")
        assert sorted(line.split(",")[0] for line in record) == sorted(
            wheel.namelist())
