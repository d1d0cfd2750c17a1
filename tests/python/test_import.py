"""The package imports, finds the library, and mirrors the C enums."""
import netvm


def test_import_finds_library():
    assert netvm.library_path
    assert netvm.__version__


def test_status_names_match_strerror():
    # every status the package knows has netvm_strerror's text, and the
    # count matches the library's (an unknown status has no specific text)
    texts = {s: netvm.strerror(s) for s in netvm.Status}
    assert all(texts.values())
    assert len(set(texts.values())) == len(texts)
    assert netvm.strerror(len(netvm.Status)) not in texts.values()


def test_error_carries_status_and_text():
    e = netvm.NetvmError(netvm.Status.ERR_KEY, "netvm_put")
    assert e.status is netvm.Status.ERR_KEY
    assert e.strerror == netvm.strerror(netvm.Status.ERR_KEY)
    assert "netvm_put" in str(e) and "NETVM_ERR_KEY" in str(e)


def _probe(env, cwd=None, pythonpath=None):
    """Import the package in a fresh interpreter; (exit status, output)."""
    import os
    import subprocess
    import sys
    e = {k: v for k, v in os.environ.items() if k != "NETVM_LIBRARY"}
    e.update(env)
    e["PYTHONPATH"] = pythonpath or os.path.dirname(os.path.dirname(netvm.__file__))
    p = subprocess.run([sys.executable, "-c", "import netvm; print(netvm.library_path)"], env=e, cwd=cwd,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return p.returncode, p.stdout


def test_library_from_netvm_library():
    rc, out = _probe({"NETVM_LIBRARY": netvm.library_path})
    assert rc == 0 and out.strip() == netvm.library_path


def test_missing_library_says_how_to_fix():
    rc, out = _probe({"NETVM_LIBRARY": "/nonexistent/libnetvm.so"})
    assert rc != 0 and "NETVM_LIBRARY" in out and "ImportError" in out


def test_library_next_to_the_package(tmp_path):
    import os
    import shutil
    pkg = os.path.dirname(netvm.__file__)
    shutil.copytree(pkg, tmp_path / "netvm", ignore=shutil.ignore_patterns("__pycache__"))
    os.symlink(os.path.realpath(netvm.library_path), tmp_path / "netvm" / "libnetvm.so")
    rc, out = _probe({}, cwd=str(tmp_path), pythonpath=str(tmp_path))
    assert rc == 0 and out.strip() == str(tmp_path / "netvm" / "libnetvm.so"), out


def test_library_in_the_build_tree(tmp_path):
    import os
    import shutil
    pkg = os.path.dirname(netvm.__file__)
    shutil.copytree(pkg, tmp_path / "python" / "netvm", ignore=shutil.ignore_patterns("__pycache__"))
    os.mkdir(tmp_path / "build")
    os.symlink(os.path.realpath(netvm.library_path), tmp_path / "build" / "libnetvm.so")
    rc, out = _probe({}, cwd=str(tmp_path), pythonpath=str(tmp_path / "python"))
    assert rc == 0 and out.strip() == str(tmp_path / "build" / "libnetvm.so"), out


def test_pip_install(tmp_path):
    """`pip install ./python` gives a package that works from anywhere (a copy
    of python/ is installed, so the source tree gets no build files)."""
    import os
    import shutil
    import subprocess
    import sys
    import pytest
    # building needs pip, setuptools and a bdist_wheel (in setuptools since 70.1, else the wheel package)
    probe = ("import setuptools, pip\n"
             "try:\n import wheel\n"
             "except ImportError:\n"
             " assert tuple(map(int, setuptools.__version__.split('.')[:2])) >= (70, 1)")
    if subprocess.run([sys.executable, "-c", probe], stderr=subprocess.DEVNULL).returncode != 0:
        pytest.skip("%s lacks pip, setuptools or wheel: pip install not tried offline" % sys.executable)
    src = os.path.dirname(os.path.dirname(netvm.__file__))
    shutil.copytree(src, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                        "--no-index", "--target", str(tmp_path / "site"), str(tmp_path / "src")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout
    rc, out = _probe({"NETVM_LIBRARY": netvm.library_path}, cwd=str(tmp_path),
                     pythonpath=str(tmp_path / "site"))
    assert rc == 0 and out.strip() == netvm.library_path, out
    assert (tmp_path / "site" / "netvm" / "context.py").exists()
