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
